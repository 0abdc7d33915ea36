"""REPLACES: the __init__ of otree.views.abstract.FormPageOrInGameWaitPage and of
starlette.endpoints.HTTPEndpoint (wrapped: each request notes its language), otree.i18n.gettext_lib,
otree.currency.dngettext, otree.templating.nodes.gettext, the class of the module otree.constants
(its ``field_required_msg``), otree.views.abstract.Page.timer_text,
otree.views.abstract.GenericWaitPageMixin.title_text, otree.forms.forms.ModelForm.Meta.locales,
otree.views.participant.validate_room_visitor (wrapped); adds ``lab_html_lang``, ``lab_text`` and
``lab_tryout`` to otree.templating.context.builtins.

WHY: oTree translates its own texts (the form error banner, WTForms' field errors, "Please
wait", the timer, the rooms' pages, "Session is full.") into one language per process. This lab
runs Chinese and English sessions on one server: a participant of an English session on a
Chinese server read them in Chinese, and the room's label errors were English whatever the
language. lab/server/otree_language.py gives each request its session's language.

HOW TO CHECK: tests/test_browser_room.py::test_otree_pages_follow_the_lab_language without this
patch (remove it from patch_modules()); look in oTree for per-request translation.
"""

from __future__ import annotations

from lab.otree_patches.marks import marked, patched_by

TARGETS = ["otree.views.abstract.FormPageOrInGameWaitPage.__init__", "starlette.endpoints.HTTPEndpoint.__init__",
           "otree.i18n", "otree.i18n.core_gettext", "otree.currency", "otree.templating.nodes",
           "otree.constants", "otree.views.abstract.Page", "otree.views.abstract.GenericWaitPageMixin",
           "otree.forms.forms.ModelForm", "otree.views.participant.validate_room_visitor",
           "otree.templating.context", "otree.settings.get_locale_name"]
REPLACED = ["otree.views.abstract.FormPageOrInGameWaitPage.__init__", "starlette.endpoints.HTTPEndpoint.__init__",
            "otree.currency.dngettext", "otree.templating.nodes.gettext", "otree.views.abstract.Page.timer_text",
            "otree.views.abstract.GenericWaitPageMixin.title_text", "otree.forms.forms.ModelForm.Meta.locales",
            "otree.views.participant.validate_room_visitor"]


def install() -> None:
    import gettext
    import types

    import otree.constants
    import otree.currency
    import otree.i18n
    import otree.templating.nodes
    import otree.views.participant
    from otree.forms.forms import ModelForm
    from otree.templating.context import builtins
    from otree.views.abstract import FormPageOrInGameWaitPage, GenericWaitPageMixin, Page
    from starlette.endpoints import HTTPEndpoint

    from lab.server import otree_language as language

    if patched_by(HTTPEndpoint.__init__) == "language":
        return
    # oTree's participant pages and its other views (rooms, links) are made per request, in the
    # request's own task: the language set here is that request's alone.
    for view in (FormPageOrInGameWaitPage, HTTPEndpoint):
        original_init = view.__init__
        view.__init__ = marked(language.noting_the_request(original_init), original_init, __name__)

    otree.i18n.gettext_lib = types.SimpleNamespace(dgettext=language.dgettext)  # core_gettext's one use of it
    otree.currency.dngettext = marked(language.dngettext, otree.currency.dngettext, __name__)

    def nodes_gettext(message):
        # nodes' {{ next_button }} and {{ trans }}: gettext's default domain, as oTree bound it
        return language.dgettext(gettext.textdomain(), message)

    otree.templating.nodes.gettext = marked(nodes_gettext, otree.templating.nodes.gettext, __name__)
    otree.constants.__class__ = language.ConstantsOfTheRequest

    def timer_text(page):
        return language.core_gettext("Time left to complete this page:")

    def title_text(page):
        return language.core_gettext("Please wait")

    Page.timer_text = property(marked(timer_text, Page.timer_text, __name__))
    GenericWaitPageMixin.title_text = property(marked(title_text, GenericWaitPageMixin.title_text, __name__))
    ModelForm.Meta.locales = property(marked(language.wtforms_locales, ModelForm.Meta.locales, __name__))
    original_validate = otree.views.participant.validate_room_visitor
    otree.views.participant.validate_room_visitor = marked(language.translated_room_errors(original_validate),
                                                           original_validate, __name__)
    builtins.update(lab_html_lang=language.html_lang, lab_text=language.lab_text, lab_tryout=language.tryout)
