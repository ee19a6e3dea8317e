"""Who may post into a room, now that a post reads its room and sender in one query (issue 27): its
participants, and its organization's owners and admins; anyone else is told there is no such room,
as for every other read of it; a participant removed is refused from then on, and a room that is no
longer active takes no post. What the post answers is what the room's pages show.
"""

from __future__ import annotations

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

CONFIG = "agents:\n  - {id: echo, kind: echo}\n"


def refusal(api: Api, room: str) -> tuple[int, str, str | None]:
    answer = api.call("POST", f"/rooms/{room}/messages", {"text": "may I?"})
    error = answer.json()["error"]
    return answer.status_code, error["code"], error["field"]


def test_participants_and_admins_post_and_everyone_else_finds_no_room(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        mia = Api(hub.url, admin.post("/users", {"id": "mia", "name": "Mia"})["api_key"])
        max_ = Api(hub.url, admin.post("/users", {"id": "max", "name": "Max"})["api_key"])
        boss = Api(hub.url, admin.post("/users", {"id": "boss", "name": "Boss", "role": "admin"})["api_key"])
        other = Api(hub.url, admin.post("/organizations", {"id": "acme"})["owner"]["api_key"])
        room = admin.post("/rooms", {"title": "r", "participants": [{"kind": "user", "id": "mia"}]})["id"]

        posted = mia.post(f"/rooms/{room}/messages", {"text": "hello", "metadata": {"k": "v"}})
        assert posted["sender"] == {"kind": "user", "id": "mia"} and posted["metadata"] == {"k": "v"}
        assert mia.get(f"/rooms/{room}/messages")["items"][-1] == posted
        assert boss.post(f"/rooms/{room}/messages", {"text": "an admin of the organization"})["text"]
        assert refusal(max_, room) == (404, "NOT_FOUND", "room_id")  # of the organization, not in it
        assert refusal(other, room) == (404, "NOT_FOUND", "room_id")  # another organization
        assert refusal(mia, "nowhere") == (404, "NOT_FOUND", "room_id")

        assert admin.call("DELETE", f"/rooms/{room}/participants/user/mia").status_code == 204
        assert refusal(mia, room) == (404, "NOT_FOUND", "room_id")
        admin.call("PATCH", f"/rooms/{room}", {"status": "archived"})
        assert refusal(boss, room) == (409, "CONFLICT", "room_id")
        texts = [item["text"] for item in admin.get(f"/rooms/{room}/messages")["items"]]
        assert texts == ["hello", "an admin of the organization"]
