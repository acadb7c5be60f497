"""Every example in README.md and docs/*.md runs as written (issue 36).

Each page's fenced code blocks run in the page's order, in a fresh working directory that
holds the data files the page names (made by `DATA_FILES`, listed per page in `PAGE_DATA`,
never written into the examples): the ``python`` blocks in one namespace, each
``ltdask ...`` line of a ``bash`` block as a command (``python -m ltdask.cli``, this
checkout's code) that must exit with 0. ``toml`` blocks must parse; ``text`` blocks (shown
output) and MyST directives (```` ```{image} ````) are not code. Lines that are not run are
listed in `NOT_RUN`, with the reason.

A page with a code block in a language the test does not know, a command it does not know,
or no row in `PAGE_DATA` fails, and so does a new example that names a file or a variable the
page does not provide: every example stays runnable.
"""

from __future__ import annotations

import copy
import math
import os
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
import pytest
from helpers.mibfiles import encode_frame, header_bytes, layout_fields, write_hdr
from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: what each block's language means here
RUN = ("python", "bash")
CHECK = ("toml",)
NOT_CODE = ("text",)

#: command lines of bash blocks that are not run, by their first words, and why
NOT_RUN = {
    ("python", "-m", "pip", "install"): ".ci/run runs the install (in a fresh virtual "
    "environment); this test runs in the environment it made",
    ("python", "-m", "pytest"): ".ci/run runs the test suite; from here it would run this "
    "test again",
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the block's first line of code, counted from 1
    lang: str
    text: str

    def __str__(self) -> str:
        return f"{self.page}, line {self.line} ({self.lang})"


def page_name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page, as markdown-it (MyST's parser) finds them."""
    tokens = MarkdownIt("commonmark").parse(path.read_text())
    return [
        Block(page_name(path), t.map[0] + 2, t.info.split()[0] if t.info else "", t.content)
        for t in tokens
        if t.type == "fence" and t.map is not None
    ]


def is_directive(block: Block) -> bool:
    return block.lang.startswith("{")


def commands(block: Block) -> list[list[str]]:
    """The commands of a bash block: lines joined at a trailing backslash, ``#`` comments
    left out, ``a && b`` split in two."""
    out = []
    for line in block.text.replace("\\\n", " ").splitlines():
        command: list[str] = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word == "&&":
                if command:
                    out.append(command)
                command = []
            else:
                command.append(word)
    return out


def not_run_reason(command: list[str]) -> str | None:
    for prefix, reason in NOT_RUN.items():
        if tuple(command[: len(prefix)]) == prefix:
            return reason
    return None


def problems(blocks: list[Block]) -> list[str]:
    """What the test would not know how to run: blocks in other languages, commands that are
    neither ``ltdask`` nor listed in `NOT_RUN`."""
    found = []
    for block in blocks:
        if is_directive(block) or block.lang in NOT_CODE + CHECK:
            continue
        if block.lang not in RUN:
            found.append(f"{block}: a block in {block.lang or 'no language'!r}")
        elif block.lang == "bash":
            found += [
                f"{block}: {shlex.join(c)!r} is neither an ltdask command nor in NOT_RUN"
                for c in commands(block)
                if c[0] != "ltdask" and not_run_reason(c) is None
            ]
    return found


# --- the data the pages name -------------------------------------------------------------

#: a scan as the README describes one: 128 x 128 frames of 256 x 256 uint16 pixels
RAW_NAV, SIG = (128, 128), (256, 256)
#: frames of scan.raw that hold a diffraction disk; the rest of the 2 GiB file is a hole
RAW_DISK_EVERY = 8
#: scan.mib: a 64 x 64 scan of a Merlin chip (256 x 256 pixels) counting with 1 bit
MIB_NAV = (64, 64)


def disk(centre: tuple[float, float], radius: float) -> np.ndarray:
    y, x = np.ogrid[: SIG[0], : SIG[1]]
    return (y - centre[0]) ** 2 + (x - centre[1]) ** 2 <= radius**2


def shift(y: int, x: int) -> tuple[int, int]:
    """The disk's shift at scan position ``(y, x)``, so that centres of mass vary."""
    return y % 7 - 3, x % 5 - 2


def write_scan_raw(folder: Path) -> list[Path]:
    """``scan.raw``: a sparse file of the full size; every `RAW_DISK_EVERY`-th position in
    both directions holds a disk of 1000 counts over a background of 10."""
    path = folder / "scan.raw"
    frame_bytes = math.prod(SIG) * 2
    with open(path, "wb") as f:
        f.truncate(math.prod(RAW_NAV) * frame_bytes)
        for y in range(0, RAW_NAV[0], RAW_DISK_EVERY):
            for x in range(0, RAW_NAV[1], RAW_DISK_EVERY):
                dy, dx = shift(y, x)
                frame = np.where(disk((128 + dy, 128 + dx), 40), 1000, 10).astype(np.uint16)
                f.seek((y * RAW_NAV[1] + x) * frame_bytes)
                f.write(frame.tobytes())
    return [path]


def write_merlin(path: Path, frames: Callable[[int], np.ndarray], n: int, depth: int, raw: bool):
    """`n` frames (`frames(i)` gives frame i) in one ``.mib`` file, as Merlin writes them."""
    mode = "R64" if raw else {1: "U08", 6: "U08", 12: "U16"}[depth]
    fields = layout_fields(SIG, mode, depth, False, 0)
    encoded: dict[int, bytes] = {}  # the same frames recur: encode each once
    with open(path, "wb") as f:
        for i in range(n):
            frame = frames(i)
            key = hash(frame.tobytes())
            if key not in encoded:
                encoded[key] = encode_frame(frame, mode, depth, False, 0)
            f.write(header_bytes(i + 1, pixel_type=mode, depth=depth, **fields))
            f.write(encoded[key])


def write_scan_mib(folder: Path) -> list[Path]:
    """``scan.mib`` and its ``scan.hdr``: a 1-bit raw (``R64``) 64 x 64 scan, a disk of
    radius 50 that moves with the scan position."""
    disks = {}

    def frame(i: int) -> np.ndarray:
        s = shift(*divmod(i, MIB_NAV[1]))
        if s not in disks:
            disks[s] = disk((128 + s[0], 128 + s[1]), 50).astype(np.uint8)
        return disks[s]

    n = math.prod(MIB_NAV)
    write_merlin(folder / "scan.mib", frame, n, depth=1, raw=True)
    write_hdr(folder / "scan.hdr", n, depth=1, scan=MIB_NAV)
    return [folder / "scan.mib", folder / "scan.hdr"]


#: the detector's bad pixels in the reference files: two hot, one dead
HOT = [(20, 30), (200, 101)]
DEAD = [(90, 180)]


def write_dark_series(folder: Path) -> list[Path]:
    """``dark.mib``: 16 frames of a 6-bit Merlin, counts of mean 2 (the noise a dark series
    shows), the hot pixels always at 40 and the dead one at 0 (what `find_excluded` finds)."""
    rng = np.random.default_rng(36)
    stack = rng.poisson(2, (16, *SIG)).astype(np.uint8)
    for p in HOT:
        stack[(slice(None), *p)] = 40
    for p in DEAD:
        stack[(slice(None), *p)] = 0
    write_merlin(folder / "dark.mib", lambda i: stack[i], len(stack), depth=6, raw=False)
    return [folder / "dark.mib"]


def write_references(folder: Path) -> list[Path]:
    """``dark.npy``, ``gain.npy`` (float32, the frame's shape) and ``bad.npy`` (a boolean
    mask of the hot and dead pixels)."""
    rng = np.random.default_rng(37)
    bad = np.zeros(SIG, dtype=bool)
    for p in HOT + DEAD:
        bad[p] = True
    files = {
        "dark.npy": np.full(SIG, 0.01, dtype=np.float32),
        "gain.npy": rng.uniform(0.9, 1.1, SIG).astype(np.float32),
        "bad.npy": bad,
    }
    for name, array in files.items():
        np.save(folder / name, array)
    return [folder / name for name in files]


#: the makers of the data files, by the names the pages use (a maker makes the files that
#: go together: scan.mib with its scan.hdr, the three reference arrays)
DATA_FILES: dict[str, Callable[[Path], list[Path]]] = {
    "scan.raw": write_scan_raw,
    "scan.mib": write_scan_mib,
    "dark.mib": write_dark_series,
    "dark.npy": write_references,
    "gain.npy": write_references,
    "bad.npy": write_references,
}

#: the data files each page with code names (a page not listed fails)
PAGE_DATA: dict[str, tuple[str, ...]] = {
    "README.md": ("scan.raw",),
    "docs/index.md": ("scan.mib",),
    "docs/getting-started.md": ("scan.raw", "scan.mib"),
    "docs/command-line.md": ("scan.raw", "scan.mib"),
    "docs/coming-from-hyperspy.md": (),
    "docs/concepts.md": ("scan.raw",),
    "docs/formats.md": (),
    "docs/corrections.md": ("scan.mib", "dark.npy", "gain.npy", "bad.npy", "dark.mib"),
    "docs/distributed.md": ("scan.raw",),
    "docs/live.md": ("scan.mib",),
}

PAGES_WITH_CODE = [
    p for p in PAGES if any(not is_directive(b) and b.lang not in NOT_CODE for b in code_blocks(p))
]


def test_every_page_with_code_has_its_data_and_every_block_is_known():
    """The quick half (no example runs): `PAGE_DATA` has a row for each page with code and
    none for others, every block's language and every command is one the test runs or
    lists in `NOT_RUN`, and every `NOT_RUN` entry is used."""
    names = [page_name(p) for p in PAGES_WITH_CODE]
    assert sorted(PAGE_DATA) == sorted(names), "PAGE_DATA must have a row per page with code"
    assert all(f in DATA_FILES for files in PAGE_DATA.values() for f in files)
    blocks = [b for p in PAGES for b in code_blocks(p)]
    assert problems(blocks) == []
    used = {
        prefix
        for b in blocks
        if b.lang == "bash"
        for c in commands(b)
        for prefix in NOT_RUN
        if tuple(c[: len(prefix)]) == prefix
    }
    assert used == set(NOT_RUN)


def test_unknown_blocks_and_commands_are_found():
    """The check itself: a block in another language and a command the test does not know
    are reported; ``ltdask`` commands, `NOT_RUN` lines, comments, continuations are not."""
    bash = Block(
        "p.md",
        3,
        "bash",
        "python -m pip install -e . && ltdask demo  # the demo\n"
        "ltdask run sum scan.raw \\\n    --nav-shape 2,2\ncurl https://x | sh\n",
    )
    assert commands(bash) == [
        ["python", "-m", "pip", "install", "-e", "."],
        ["ltdask", "demo"],
        ["ltdask", "run", "sum", "scan.raw", "--nav-shape", "2,2"],
        ["curl", "https://x", "|", "sh"],
    ]
    found = problems([bash, Block("p.md", 9, "sh", "ltdask demo"), Block("p.md", 12, "text", "")])
    assert len(found) == 2
    assert "curl" in found[0] and "neither an ltdask command nor in NOT_RUN" in found[0]
    assert "p.md, line 9 (sh): a block in 'sh'" in found[1]


@pytest.fixture(scope="module")
def provide(tmp_path_factory) -> Callable[[str, Path], None]:
    """Links the data file `name` (and the files made with it) into a page's folder; each
    is made once, when a page first needs it (scan.raw's pages share its page cache)."""
    folder = tmp_path_factory.mktemp("doc-data")
    made: dict[Callable, list[Path]] = {}

    def provide(name: str, into: Path) -> None:
        maker = DATA_FILES[name]
        if maker not in made:
            made[maker] = maker(folder)
        for path in made[maker]:
            if not (into / path.name).exists():
                os.link(path, into / path.name)

    return provide


def run_command(command: list[str], cwd: Path, block: Block) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in [str(REPO), os.environ.get("PYTHONPATH", "")] if p
        ),
        "TMPDIR": str(cwd),  # where `ltdask demo` without --out writes
        "MPLBACKEND": "Agg",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ltdask.cli", *command[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"{block}: {shlex.join(command)} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
    )


#: the first line of a block that needs CuPy and a CUDA device: where there is none, its
#: python is only compiled and its commands only checked to be ltdask's
NEEDS_GPU = "# needs CuPy and a GPU"


def runs_here(block: Block) -> bool:
    """Whether `block` runs on this machine (blocks that need a GPU only where one is)."""
    from ltdask.udf.backends import local_gpu

    return not block.text.startswith(NEEDS_GPU) or local_gpu()


def run_python(block: Block, namespace: dict) -> None:
    # blank lines before the code, so that a traceback gives the page's line numbers
    code = compile("\n" * (block.line - 1) + block.text, block.page, "exec")
    if runs_here(block):
        exec(code, namespace)


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", PAGES_WITH_CODE, ids=[page_name(p).removeprefix("docs/") for p in PAGES_WITH_CODE]
)
def test_page_examples_run(page, tmp_path, provide, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from distributed import Client

    name = page_name(page)
    assert name in PAGE_DATA, f"{name}: add a row to PAGE_DATA naming the data its examples use"
    blocks = code_blocks(page)
    assert problems(blocks) == []
    for file in PAGE_DATA[name]:
        provide(file, tmp_path)
    monkeypatch.chdir(tmp_path)
    config = copy.deepcopy(dask.config.config)  # pages set options for the rest of a session
    namespace: dict = {"__name__": "__main__"}
    try:
        for block in blocks:
            if block.lang == "python":
                run_python(block, namespace)
            elif block.lang == "bash":
                for command in commands(block):
                    if not_run_reason(command) is None and runs_here(block):
                        run_command(command, tmp_path, block)
            elif block.lang == "toml":
                tomllib.loads(block.text)
    finally:
        for value in list(namespace.values()):
            if isinstance(value, Client):
                cluster = value.cluster
                value.close()
                if cluster is not None:
                    cluster.close()
        plt.close("all")
        dask.config.config.clear()
        dask.config.config.update(config)
