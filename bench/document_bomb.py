"""Office bombs uploaded to a live server while another account works (prints figures).

    .venv/bin/python bench/document_bomb.py [--requests 200] [--heavy-paragraphs 20000]

Starts a daphne server on a throwaway SQLite database. Bob uploads, through `POST /v1/folders/{id}/upload`, the
documents of issue 51 and variants built here with zipfile: a DOCX whose word/document.xml expands to 400 MB, one
holding 1 GiB of text in about a megabyte, an XLSX and a PPTX bomb, a DOCX hiding a zip bomb inside an embedded zip
(its listing declares nothing big: only unpacking finds it), and a large DOCX of varied text within every limit,
which a parser process really parses and ingests. Each is polled until it is `completed` or `error`. Meanwhile Alice
lists her agents over and over: the figures are each file's outcome and time, Alice's p50/p95 before and during
(target: p95 under 200 ms), and the server's resident memory before and at its peak.
"""

import argparse
import io
import os
import random
import time
import zipfile

import httpx
from benchlib import (
    bystander,
    django_ready,
    live_server,
    machine_speed_s,
    p50_p95,
    rss_mb,
    throwaway_sqlite,
    timed_gets,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
MB = 1024 * 1024
WORDS = [
    "harbour",
    "ferry",
    "lighthouse",
    "keeper",
    "tide",
    "pier",
    "ledger",
    "ember",
    "cobalt",
    "birch",
    "amber",
    "fjord",
    "dahlia",
    "garnet",
]


def _setup():
    """Bob (a folder for the bombs) and Alice (one agent); their tokens and Bob's folder id."""
    django_ready()
    from memory.files import services
    from tests.factories import make_account, make_agent

    bob, alice = make_account("bob"), make_account("alice")
    make_agent(alice.org, name="bystander")
    folder = services.folder_create(owner=bob.org, name="bombs")
    return bob.token, alice.token, folder.id


def _office(ext: str) -> bytes:
    out = io.BytesIO()
    if ext == ".docx":
        import docx

        document = docx.Document()
        document.add_paragraph("Quarterly report")
        document.save(out)
    elif ext == ".xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        book.active["A1"] = "ledger"
        book.save(out)
    else:
        import pptx

        deck = pptx.Presentation()
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "Quarterly numbers"
        deck.save(out)
    return out.getvalue()


MAIN_PART = {".docx": "word/document.xml", ".xlsx": "xl/worksheets/sheet1.xml", ".pptx": "ppt/slides/slide1.xml"}


def _bomb(ext: str, expanded: int, *, unit: bytes) -> bytes:
    """The document with its main part padded to `expanded` bytes of `unit` repeated, written in streamed chunks
    (deflated at the highest level: about a thousand to one)."""
    data = _office(ext)
    part = MAIN_PART[ext]
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst,
    ):
        for info in src.infolist():
            if info.filename != part:
                dst.writestr(info.filename, src.read(info.filename))
                continue
            xml = src.read(part)
            cut = xml.rindex(b"</")
            block = unit * (MB // len(unit))
            with dst.open(part, "w", force_zip64=True) as stream:
                stream.write(xml[:cut])
                for _ in range(expanded // len(block)):
                    stream.write(block)
                stream.write(xml[cut:])
    return out.getvalue()


def _nested(expanded: int) -> bytes:
    """A DOCX with a zip bomb stored inside it as an embedded object: the outer listing declares a small part."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z, z.open("data.xml", "w") as stream:
        block = b"<!-- lorem ipsum dolor sit amet -->" * (MB // 35)
        for _ in range(expanded // len(block)):
            stream.write(block)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_office(".docx"))) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
        dst.writestr("word/embeddings/object1.zip", inner.getvalue(), compress_type=zipfile.ZIP_STORED)
    return out.getvalue()


def _heavy(paragraphs: int) -> bytes:
    """A large DOCX of varied text within every limit: a parser process parses all of it."""
    import docx

    rng = random.Random(7)
    document = docx.Document()
    for n in range(paragraphs):
        document.add_paragraph(f"{n}: " + " ".join(rng.choice(WORDS) for _ in range(40)))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _documents(heavy_paragraphs: int) -> list[tuple[str, bytes]]:
    text = b"<w:p><w:r><w:t>lorem ipsum dolor sit amet</w:t></w:r></w:p>"
    return [
        ("report-400mb.docx", _bomb(".docx", 400 * MB, unit=text)),
        ("report-1gib.docx", _bomb(".docx", 1024 * MB, unit=text)),
        ("ledger-400mb.xlsx", _bomb(".xlsx", 400 * MB, unit=b"<!-- ledger padding ledger padding -->")),
        ("deck-400mb.pptx", _bomb(".pptx", 400 * MB, unit=b"<!-- deck padding deck padding -->")),
        ("nested-400mb.docx", _nested(400 * MB)),
        ("book.docx", _heavy(heavy_paragraphs)),
    ]


def _bob(base: str, token: str, folder_id: str, documents) -> list[tuple[str, int, str, str, float]]:
    """Upload every document at once, then poll each until it ends: (name, bytes, status, message, seconds)."""
    done = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300) as client:
        started, pending = time.perf_counter(), {}
        for name, data in documents:
            answer = client.post(f"/v1/folders/{folder_id}/upload", files={"file": (name, data)})
            answer.raise_for_status()
            pending[answer.json()["id"]] = (name, len(data))
        while pending:
            time.sleep(0.25)
            for file_id, (name, size) in list(pending.items()):
                file = client.get(f"/v1/folders/{folder_id}/files/{file_id}").json()
                if file["processing_status"] in ("completed", "error"):
                    message = file.get("error_message") or f"{file.get('total_chunks')} passages"
                    done.append((name, size, file["processing_status"], message, time.perf_counter() - started))
                    del pending[file_id]
    return done


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200, help="Alice's requests before the uploads")
    p.add_argument("--heavy-paragraphs", type=int, default=20_000, help="paragraphs of the DOCX within the limits")
    args = p.parse_args()

    speed = machine_speed_s()
    built = time.perf_counter()
    documents = _documents(args.heavy_paragraphs)
    built = time.perf_counter() - built
    throwaway_sqlite("bench-bomb-")
    bob, alice, folder_id = _setup()
    with live_server({**os.environ, "OPENAI_API_KEY": "fake"}, "bomb") as (base, server):
        rss_before = rss_mb(server.pid)
        before = timed_gets(base, alice, args.requests)
        with bystander(base, alice) as during:
            outcomes = _bob(base, bob, folder_id, documents)
        rss_peak = rss_mb(server.pid, "VmHWM")
    print(f"machine's loop {speed:.2f} s; documents built in {built:.1f} s")
    for name, size, status, message, seconds in outcomes:
        print(f"  {name:<20} {size / 1e6:6.2f} MB  {status:<9} after {seconds:5.1f} s  {message[:110]}")
    print(f"server memory: {rss_before:.0f} MB resident before, peak {rss_peak:.0f} MB")
    print(
        f"Alice's GET /v1/agents/: before {p50_p95(before)}; during the uploads ({len(during)} requests) "
        f"{p50_p95(during)} (target p95 < 200 ms)"
    )


if __name__ == "__main__":
    main()
