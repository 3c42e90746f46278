"""The site's page routers, in the order they are matched (the organizer dashboard's before the
participant pages', as when they were one module); server/app.py includes this one router.
The account, team, joining and fact-sheet pages are included by the app beside their JSON
routes."""

from __future__ import annotations

from fastapi import APIRouter

from server.web import (
    actions,
    api_docs,
    competition_pages,
    login,
    organizer,
    static_files,
    submission_pages,
    submit_pages,
)

router = APIRouter(include_in_schema=False)
for _module in (organizer, actions, static_files, competition_pages, login, submit_pages,
                submission_pages, api_docs):
    router.include_router(_module.router)
