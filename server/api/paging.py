"""Pagination of every list that can grow without bound (issue 21: 20,000 phases made the home
page 5.2 MB and `/phases` 18.5 MB).

A list route takes `limit` (default `DEFAULT_LIMIT`, at most `MAX_LIMIT`) and `offset`, reads
one row more than it returns to know whether more follow, and then names the next page in an
RFC 8288 `Link: <...>; rel="next"` header (absent on the last page), so a client follows links
instead of guessing offsets. The body stays a plain JSON list, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request, Response
from sqlalchemy import Select

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 2**31
T = TypeVar("T")


Rows = TypeVar("Rows", bound="Select[*tuple[Any, ...]]")


@dataclass(frozen=True)
class Page:
    """One window of a list: `limit` items from `offset`."""

    limit: int
    offset: int

    def select(self, query: Rows) -> Rows:
        """`query` (already ordered) narrowed to this window plus one row, for `window`."""
        return query.limit(self.limit + 1).offset(self.offset)

    def window(self, rows: Sequence[T], *, fetched: bool = False) -> tuple[list[T], bool]:
        """This window of `rows` and whether more follow. `fetched`: `rows` came from
        `select` (already offset, one extra row) rather than being the whole list."""
        start = 0 if fetched else self.offset
        chunk = list(rows[start:start + self.limit + 1])
        return chunk[:self.limit], len(chunk) > self.limit


def page_params(limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=(
                    "items at most; the `Link` header names the next page"))] = DEFAULT_LIMIT,
                offset: Annotated[int, Query(ge=0, le=MAX_OFFSET,
                                             description="items to skip")] = 0) -> Page:
    return Page(limit=limit, offset=offset)


PageDep = Annotated[Page, Depends(page_params)]


def link_next(request: Request, response: Response, page: Page, more: bool) -> None:
    """Name the next page in the `Link` header when `more` items follow this one."""
    if more:
        url = request.url.include_query_params(limit=page.limit, offset=page.offset + page.limit)
        # A relative reference: right behind a proxy that rewrites the host, too.
        response.headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'


def paged(request: Request, response: Response, page: Page, rows: Sequence[T], *,
          fetched: bool = False) -> list[T]:
    """`page.window(rows)`, with the next page's link set on `response`."""
    items, more = page.window(rows, fetched=fetched)
    link_next(request, response, page, more)
    return items
