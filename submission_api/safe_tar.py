"""Safe tar extraction on every Python that `requires-python` admits.

`TarFile.extractall(filter="data")` exists only from Python 3.11.4 (and 3.12); Debian 12 ships
3.11.2. Where the keyword is missing, members are checked one by one against the same rules as
`tarfile.data_filter` (no absolute or `..` paths, no links leaving the target, no devices or
FIFOs, no setuid/group-write/other-write bits, no ownership taken from the archive) and only
then extracted. Checks resolve paths on disk before each member, as `data_filter` does, so a
link planted by an earlier member cannot carry a later one out of the target.
"""

from __future__ import annotations

import copy
import os
import stat
import tarfile

#: Whether this interpreter has extraction filters (PEP 706): 3.11.4+, 3.12+.
HAS_TAR_FILTER = hasattr(tarfile, "data_filter")


class UnsafeTarError(tarfile.TarError):
    """A member would escape the target or is not plain data; callers already catch TarError."""


def extract_tar(archive: tarfile.TarFile, dest: str | os.PathLike[str], *,
                use_filter: bool | None = None) -> None:
    """Extract every member of `archive` under `dest`, refusing anything unsafe.

    `use_filter` forces one path (tests run the fallback on any interpreter); by default the
    standard `data` filter is used where this Python has it.
    """
    if use_filter is None:
        use_filter = HAS_TAR_FILTER
    if use_filter:
        archive.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    os.makedirs(root, exist_ok=True)
    for member in archive:
        safe = check_member(member, root)
        # Directory modes are left to the defaults (as `data_filter` does): a read-only folder
        # set early would stop its own files from being written.
        archive.extract(safe, root, set_attrs=not safe.isdir())


def check_member(member: tarfile.TarInfo, root: str) -> tarfile.TarInfo:
    """A copy of `member` safe to extract under the real path `root`, or UnsafeTarError."""
    name = member.name
    if name.startswith("/") or os.path.isabs(name):
        raise UnsafeTarError(f"tar member {name!r} has an absolute path")
    target = os.path.realpath(os.path.join(root, name))
    if not _inside(target, root):
        raise UnsafeTarError(f"tar member {name!r} would be written outside the target folder")
    if member.ischr() or member.isblk() or member.isfifo() or not (
            member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeTarError(f"tar member {name!r} is a device, FIFO or other special file")
    if member.issym():
        if os.path.isabs(member.linkname):
            raise UnsafeTarError(f"tar symlink {name!r} points to an absolute path")
        link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
        if not _inside(link, root):
            raise UnsafeTarError(f"tar symlink {name!r} points outside the target folder")
    if member.islnk():
        link = os.path.realpath(os.path.join(root, member.linkname))
        if os.path.isabs(member.linkname) or not _inside(link, root):
            raise UnsafeTarError(f"tar hard link {name!r} points outside the target folder")
    safe = copy.copy(member)
    if safe.isreg() or safe.islnk():
        # Owner may read and write; no setuid/setgid/sticky; nobody else may write.
        safe.mode = (safe.mode | stat.S_IRUSR | stat.S_IWUSR) & 0o755
    else:
        safe.mode = 0o755
    # Ownership comes from the extracting process, never from the archive (matters as root).
    safe.uid, safe.gid, safe.uname, safe.gname = os.geteuid(), os.getegid(), "", ""
    return safe


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root

