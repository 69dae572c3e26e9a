"""The `example` fixture: every document in assets/examples."""
from __future__ import annotations

import pytest
from export_helpers import EXAMPLES


@pytest.fixture(params=EXAMPLES, ids=[p.stem for p in EXAMPLES])
def example(request):
    from app.document import load_document

    return load_document(request.param)
