"""oTree's admin, logged in, as plain HTTP: the dashboard's actions (lab/experimenter/interventions.py) and the
payment app's custom exports, for tests whose server runs with OTREE_AUTH_LEVEL=STUDY."""

from __future__ import annotations

import csv
import io
import re

import requests

ADMIN_PASSWORD = "test-admin-password"
REST_KEY = "test-rest-key"
AUTH_ENV = dict(OTREE_AUTH_LEVEL="STUDY", OTREE_ADMIN_PASSWORD=ADMIN_PASSWORD, OTREE_REST_KEY=REST_KEY)
_TOKEN = re.compile(r'name="csrftoken" value="(\d+)"')


class AdminClient:
    def __init__(self, base_url: str, log_in: bool = True):
        self.base_url = base_url
        self.http = requests.Session()
        if log_in:
            token = self._token("/login")
            response = self.http.post(f"{base_url}/login", timeout=30, data=dict(
                username="admin", password=ADMIN_PASSWORD, csrftoken=token))
            assert response.ok and "/login" not in response.url, response.url

    def _token(self, path: str) -> str:
        found = _TOKEN.search(self.http.get(f"{self.base_url}{path}", timeout=30).text)
        return found.group(1) if found else ""

    def act(self, session_code: str, action: str, **fields) -> requests.Response:
        """POST one of the dashboard's actions, with the CSRF token of the dashboard's page."""
        token = self._token(f"/LabDashboard/{session_code}")
        return self.http.post(f"{self.base_url}/LabIntervene/{session_code}", timeout=60,
                              data=dict(action=action, csrftoken=token, **fields))

    def export(self, function_name: str, session_code: str) -> list[dict]:
        """A custom export of the payment app (oTree's REST API: with OTREE_AUTH_LEVEL, its key)."""
        response = self.http.get(f"{self.base_url}/api/export_app_custom", timeout=60, params=dict(
            app="payment", function_name=function_name, session_code=session_code),
            headers={"otree-rest-key": REST_KEY})
        assert response.ok, response.status_code
        return list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))

    def interventions(self, session_code: str) -> list[dict]:
        return self.export("custom_export_interventions", session_code)
