"""Fixtures of the Qwen-Agent port tests: the protocol-speaking loopback model and the files the ports read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.documents import make_pdf
from tests.support.protocol_server import ProtocolServer

IMAGE_GUIDE = [
    "Image operations guide. This document lists the operations our image service supports.",
    "Flipping. To flip an image horizontally, use ImageOps.mirror(image); to flip it vertically, use "
    "ImageOps.flip(image). Flipping keeps the size of the image.",
    "Rotating. To rotate an image by 90 degrees, use image.rotate(90, expand=True). Angles are counter-clockwise.",
    "Colours. To make an image grey, use ImageOps.grayscale(image). To invert it, use ImageOps.invert(image).",
]
FILLER = "The committee reviewed the quarterly figures and noted steady progress in every region. " * 30
REPORT = [f"Section {i}. {FILLER}" for i in range(1, 13)]
REPORT[8] += " The secret code of the vault is 4242, known only to the treasurer."
STOCK_PRICES = "Date,Open,Close\n" + "\n".join(f"2024-01-{d:02d},{100 + d},{101 + d * 1.5:.1f}" for d in range(1, 21))


def make_resources(root: Path) -> Path:
    """The files the ports read: doc.pdf (an image operations guide), report.pdf (12 pages, one fact on page 9),
    stock_prices.csv."""
    root.mkdir(parents=True, exist_ok=True)
    make_pdf(IMAGE_GUIDE, root / "doc.pdf")
    make_pdf(REPORT, root / "report.pdf")
    (root / "stock_prices.csv").write_text(STOCK_PRICES)
    return root


@pytest.fixture(scope="session")
def resources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_resources(tmp_path_factory.mktemp("port-resources"))


@pytest.fixture(scope="session")
def _protocol_server_session() -> Iterator[ProtocolServer]:
    with ProtocolServer().start() as server:
        yield server


@pytest.fixture
def protocol_server(_protocol_server_session: ProtocolServer) -> Iterator[ProtocolServer]:
    """The protocol-speaking model, with nothing scripted and nothing recorded."""
    _protocol_server_session.reset()
    yield _protocol_server_session
    _protocol_server_session.reset()
