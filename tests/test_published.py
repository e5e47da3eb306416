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


def test_unknown_filters_raise_listing_the_known_values():
    # A misspelt model or weight format matched nothing and returned [] quietly.
    with pytest.raises(ValueError, match=r"model must be one of \['llama-2-70b', 'llama-2-7b', 'mixtral-8x7b'\], "
                                         r"got 'nope'"):
        published_decode("nope")
    with pytest.raises(ValueError, match=r"weights must be one of \['bf16', 'int4-g32', 'int8'\], got 'int3'"):
        published_decode("llama-2-7b", weights="int3")
    with pytest.raises(ValueError, match="tp_degree must be an integer >= 1"):
        published_decode(tp_degree=0)
    # A known model at a degree never published is an honest empty list.
    assert published_decode("mixtral-8x7b", tp_degree=8) == []
    assert len(published_decode("llama-2-70b", weights="bf16")) == 4


def test_predicted_tpot_comm_must_be_a_bool():
    from servelib.published import predicted_tpot_s
    row = published_decode("llama-2-70b", weights="bf16", tp_degree=8)[0]
    with pytest.raises(TypeError, match="comm must be True or False"):
        predicted_tpot_s(row, comm="no")
