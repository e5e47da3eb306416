"""The published dataset agrees with itself: tokens/s x bytes of weights = the bandwidth column."""
import pytest

from servelib.models import get_model
from servelib.published import GPT_FAST, GPT_FAST_MIXTRAL, published_decode

BYTES = {"bf16": 2, "int8": 1}


@pytest.mark.parametrize("row", [r for r in GPT_FAST if r.weights in BYTES and r.tokens_per_s],
                         ids=lambda r: f"{r.model}-{r.weights}-tp{r.tp_degree}-{r.gpu}")
def test_bandwidth_column_is_weights_read_per_second(row):
    # gpt-fast's "memory bandwidth" is the weights each GPU reads per second. Under TP it
    # shards the layers but keeps the (untied) embedding and LM head whole on every GPU;
    # servelib's parameter count reproduces the column within 3% that way.
    m = get_model(row.model)
    embed = 2 * m.vocab_size * m.hidden_size
    per_gpu = ((m.n_params - embed) / row.tp_degree + embed) * BYTES[row.weights]
    assert row.tokens_per_s * per_gpu / 1e9 == pytest.approx(row.bandwidth_GBps, rel=0.03)


def test_filters_and_counts():
    assert len(GPT_FAST) == 15
    assert [r.tp_degree for r in published_decode("llama-2-7b", weights="bf16")] == [1, 2, 4, 8, 1]
    assert published_decode("mixtral-8x7b") == [GPT_FAST_MIXTRAL]
    assert published_decode("llama-2-70b", tp_degree=1, weights="bf16")[0].tpot_s is None
    assert GPT_FAST_MIXTRAL.tpot_s == pytest.approx(1 / 96)
