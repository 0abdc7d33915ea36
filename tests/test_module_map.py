"""docs/testing.md maps every module of lab/, agents/ and analysis/ to the tests that exercise it
(tests/module_map.py). No server."""

from tests import module_map


def test_the_map_lists_every_module_and_no_other():
    listed = module_map.listed_modules(module_map.TESTING_MD.read_text(encoding="utf-8"))
    on_disk = {path.relative_to(module_map.PROJECT).as_posix() for path in module_map.modules().values()}
    assert not on_disk - listed, f"not in docs/testing.md's map (run `python -m tests.module_map`): {on_disk - listed}"
    assert not listed - on_disk, f"in docs/testing.md's map but gone (run `python -m tests.module_map`): {listed - on_disk}"


def test_a_module_a_test_imports_is_mapped_to_it():
    exercised = module_map.exercised_by()
    assert "test_parsing.py" in exercised["agents.parsing"]  # `from agents.parsing import ...`
    assert "test_journal_after_commit.py" in exercised["lab.agent_runtime.journal"]  # in a script it runs
    assert "test_data_dictionary.py" in exercised["lab.record.data_dictionary"]  # `from lab.record import data_dictionary`
