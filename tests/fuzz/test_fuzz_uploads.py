"""Malformed and hostile zips against the real upload endpoint: each is refused with a clear,
stable code, and nothing is stored (no submission row, no stored zip, no temp file, no job)."""

from __future__ import annotations

import io
import os
import stat
import zipfile

import pytest
from inprocess_support import MODEL, InProcess, zip_bytes

GOOD = zip_bytes()


def entry_with_mode(name: str, data: bytes, mode: int) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info, data


def raw_zip(entries: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for info, data in entries:
            zf.writestr(info, data)
    return buf.getvalue()


def with_method(data: bytes, method: int) -> bytes:
    """Rewrite every entry's compression method in the local and central headers."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        start = 0
        while (at := out.find(signature, start)) != -1:
            out[at + offset:at + offset + 2] = method.to_bytes(2, "little")
            start = at + 4
    return bytes(out)


def with_flag(data: bytes, flag: int) -> bytes:
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(signature)
        out[at + offset:at + offset + 2] = flag.to_bytes(2, "little")
    return bytes(out)


def lying_size(data: bytes) -> bytes:
    """Declare a smaller uncompressed size than the real one in both headers."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = out.find(signature)
        out[at + offset:at + offset + 4] = (10).to_bytes(4, "little")
    return bytes(out)


def invalid_utf8_name() -> bytes:
    """An entry flagged UTF-8 (zipfile sets the flag for 'é') whose name bytes are not UTF-8."""
    return zip_bytes([("model.py", MODEL), ("\u00e9.txt", b"x")]).replace(b"\xc3\xa9", b"\xc3\x28")


NESTED_ONLY = zip_bytes([("inner.zip", GOOD)])
CYRILLIC_O = "m\u043edel.py"  # 'о' is U+043E, not Latin 'o'
BAD_ZIPS = {
    "empty_file": (b"", "zip.corrupt"),
    "not_a_zip": (os.urandom(4096), "zip.corrupt"),
    "truncated": (zip_bytes([("model.py", MODEL), ("w.bin", os.urandom(50_000))])[:30_000],
                  "zip.corrupt"),
    "truncated_end_record": (GOOD[:-10], "zip.corrupt"),
    "invalid_utf8_name": (invalid_utf8_name(), "zip.corrupt"),
    "lying_declared_size": (lying_size(zip_bytes([("model.py", MODEL * 500)])), "zip.corrupt"),
    "ratio_bomb": (zip_bytes([("model.py", MODEL), ("zeros.bin", b"\0" * 4 * 1024**2)]),
                   "zip.bomb"),
    "file_count_bomb": (zip_bytes([("model.py", MODEL)] + [(f"f{i}", b"") for i in range(250)]),
                        "zip.too_many_files"),
    "nested_zip_without_model": (NESTED_ONLY, "zip.no_model"),
    "dotdot_name": (zip_bytes([("model.py", MODEL), ("../evil.py", b"x")]), "zip.parent_path"),
    "deep_dotdot_name": (zip_bytes([("model.py", MODEL), ("a/b/../../../evil", b"x")]),
                         "zip.parent_path"),
    "absolute_name": (zip_bytes([("model.py", MODEL), ("/etc/cron.d/evil", b"x")]),
                      "zip.absolute_path"),
    "drive_letter_name": (zip_bytes([("model.py", MODEL), ("C:evil.py", b"x")]),
                          "zip.absolute_path"),
    "backslash_name": (zip_bytes([("model.py", MODEL), ("..\\evil.py", b"x")]),
                       "zip.backslash_path"),
    "cyrillic_model_name": (zip_bytes([(CYRILLIC_O, MODEL)]), "zip.no_model"),
    "fullwidth_slash_name": (zip_bytes([("sub\uff0fmodel.py", MODEL)]), "zip.no_model"),
    "zero_width_model_name": (zip_bytes([("model.py\u200b", MODEL)]), "zip.no_model"),
    "fullwidth_dots_name": (zip_bytes([("\uff0e\uff0e/model.py", MODEL), ("x", b"")]),
                            "zip.no_model"),
    "duplicate_name": (zip_bytes([("model.py", MODEL), ("model.py", MODEL)]),
                       "zip.duplicate_name"),
    "case_duplicate_name": (zip_bytes([("model.py", MODEL), ("MODEL.py", MODEL)]),
                            "zip.duplicate_name"),
    "file_and_folder_clash": (zip_bytes([("model.py", MODEL), ("a", b"x"), ("a/b", b"y")]),
                              "zip.duplicate_name"),
    "symlink_entry": (raw_zip([entry_with_mode("model.py", MODEL, stat.S_IFREG | 0o644),
                               entry_with_mode("labels", b"/answers", stat.S_IFLNK | 0o777)]),
                      "zip.link"),
    "fifo_entry": (raw_zip([entry_with_mode("model.py", MODEL, stat.S_IFREG | 0o644),
                            entry_with_mode("pipe", b"", stat.S_IFIFO | 0o644)]),
                   "zip.special_file"),
    "encrypted_flag": (with_flag(GOOD, 0x1), "zip.encrypted"),
    "unknown_compression": (with_method(zip_bytes([("model.py", MODEL)], zipfile.ZIP_STORED), 98),
                            "zip.unsupported_compression"),
    "no_model": (zip_bytes([("readme.txt", b"hi")]), "zip.no_model"),
    "two_top_folders": (zip_bytes([("a/model.py", MODEL), ("b/model.py", MODEL)]),
                        "zip.no_model"),
}
# Over the upload cap (4 MiB here) -> 413 before anything is read into a zip check.
BAD_ZIPS["too_large_upload"] = (os.urandom(5 * 1024**2), "upload.too_large")
# Under the upload cap but over the uncompressed bound (8 MiB), each entry well below the bomb
# ratio: random text over a 4-letter alphabet compresses about 4x.
FOUR_LETTERS = bytes(97 + b % 4 for b in range(256))
BAD_ZIPS["too_large_in_total"] = (zip_bytes(
    [("model.py", MODEL)] + [(f"w{i}.txt", os.urandom(1024**2).translate(FOUR_LETTERS))
                             for i in range(10)]), "zip.too_large")


@pytest.fixture(scope="module")
def seeded(app_env: InProcess) -> dict:
    organizer = app_env.token_for("org", "organizer")
    phase_id = app_env.competition(organizer, quota_total=3)["phases"][0]["id"]
    return {"phase_id": phase_id, "eve": app_env.token_for("eve")}


def stored_files(env: InProcess) -> list[str]:
    root = env.settings.storage
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", sorted(BAD_ZIPS))
def test_a_malformed_zip_is_refused_with_a_clear_code_and_nothing_is_stored(app_env, seeded,
                                                                          name):
    data, code = BAD_ZIPS[name]
    files_before, jobs_before = stored_files(app_env), len(app_env.queue.jobs)

    answer = app_env.upload(seeded["phase_id"], seeded["eve"], data)

    expected_status = 413 if code == "upload.too_large" else 422
    assert answer.status_code == expected_status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["family"] == "participant"
    assert len(error["message"]) > 40  # says what was wrong and how to fix it
    assert stored_files(app_env) == files_before
    assert len(app_env.queue.jobs) == jobs_before
    mine = app_env.client.get("/api/v1/me/submissions", headers=seeded["eve"]).json()
    assert mine == []


MALFORMED_REQUESTS = {
    "json_body": {"json": {"file": "model.py"}},
    "urlencoded_body": {"data": {"file": "x"}},
    "multipart_without_file": {"files": {"note": (None, "hello")}},
    "multipart_two_files": {"files": [("file", ("a.zip", GOOD)), ("file", ("b.zip", GOOD))]},
    "broken_multipart": {"content": b"--xyz\r\nContent-Disposition: form-data; name=\"file\"",
                         "headers": {"Content-Type": "multipart/form-data; boundary=xyz"}},
    "no_boundary": {"content": b"abc", "headers": {"Content-Type": "multipart/form-data"}},
    "declared_huge_length": {"content": b"x", "headers": {
        "Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(10**12)}},
}


@pytest.mark.parametrize("name", sorted(MALFORMED_REQUESTS))
def test_a_malformed_upload_request_is_refused_and_nothing_is_stored(app_env, seeded, name):
    files_before = stored_files(app_env)
    kwargs = dict(MALFORMED_REQUESTS[name])
    headers = {**seeded["eve"], **kwargs.pop("headers", {})}
    try:
        answer = app_env.client.post(f"/api/v1/phases/{seeded['phase_id']}/submissions",
                                     headers=headers, **kwargs)
    except Exception as error:  # noqa: BLE001 - the client itself may refuse a lying length
        pytest.skip(f"the test client cannot send this request: {error}")
    assert answer.status_code in (413, 422), answer.text
    assert answer.json()["error"]["code"] in ("invalid_input", "upload.too_large")
    assert stored_files(app_env) == files_before


def test_a_nested_zip_beside_model_py_is_stored_unexpanded(app_env, seeded):
    """Nested archives are plain files: never expanded, so a zip-in-zip bomb costs its bytes."""
    inner = zip_bytes([("zeros.bin", b"\0" * 50 * 1024**2)])
    answer = app_env.upload(seeded["phase_id"], seeded["eve"],
                            zip_bytes([("model.py", MODEL), ("inner.zip", inner)]))
    assert answer.status_code == 201, answer.text
    assert answer.json()["size_bytes"] < 200_000


def test_after_the_fuzzing_a_good_zip_is_accepted_once(app_env, seeded):
    answer = app_env.upload(seeded["phase_id"], seeded["eve"], GOOD)
    assert answer.status_code == 201, answer.text
    jobs = [j for j in app_env.queue.jobs if j[0] in {r["id"] for r in answer.json()["runs"]}]
    assert len(jobs) == 1
