"""Capacity plans from TOML: round trips, the repository's example plans, and invalid plans."""
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelib.audit import PlanError, audit, load_plan, parse_plan, plan_to_toml
from servelib.audit.examples import all_plans, sound_plan, war_stories

PLANS = pathlib.Path(__file__).resolve().parent.parent / "plans"
SOUND = plan_to_toml(sound_plan())


@pytest.mark.parametrize("stem", sorted(all_plans()))
def test_repository_plans_match_their_definitions(stem):
    path = PLANS / f"{stem}.toml"
    assert path.read_text() == plan_to_toml(all_plans()[stem]), \
        f"{path.name} is stale: run python -m servelib.audit.examples plans/"
    assert load_plan(path) == all_plans()[stem]


def test_no_stray_plan_files():
    assert {p.stem for p in PLANS.glob("*.toml")} == set(all_plans())


def test_one_plan_per_war_story_and_a_sound_one():
    titles = [w.title for w in war_stories()]
    assert titles == ["The GPUs are too slow", "The batch that OOMed at 3 a.m.",
                      "The PTU commitment sized to peak", "The break-even that moved",
                      "The self-hosting case that won and then lost", "The shared deployment"]
    assert audit(load_plan(PLANS / "sound.toml")) == []


@pytest.mark.parametrize("story", war_stories(), ids=lambda w: w.slug)
def test_repository_war_story_files_audit_to_their_codes(story):
    plan = load_plan(PLANS / f"story-{story.slug}.toml")
    assert sorted(f.code for f in audit(plan)) == sorted(story.expected)


def _replace(text, old, new):
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize("old, new, field", [
    ("model = \"llama-3-70b\"\n", "", "deployment.model"),
    ("context_len = 8_192\n", "", "deployment.context_len"),
    ("[serving]\nmax_batch = 256\n", "", "serving.max_batch"),
    ("name = \"sound\"\n", "", "plan.name"),
])
def test_missing_field_is_named(old, new, field):
    with pytest.raises(PlanError, match=f"{field}: is required"):
        parse_plan(_replace(SOUND, old, new))


@pytest.mark.parametrize("old, new, field, words", [
    ("n_gpus = 8", "n_gpus = \"8\"", "deployment.n_gpus", "integer"),
    ("n_gpus = 8", "n_gpus = 8.5", "deployment.n_gpus", "integer"),
    ("tp_degree = 8", "tp_degree = true", "deployment.tp_degree", "integer"),
    ("reserve_fraction = 0.1", "reserve_fraction = \"10%\"", "deployment.reserve_fraction", "number"),
    ("model = \"sound\"" if False else "name = \"sound\"", "name = 3", "plan.name", "string"),
])
def test_wrong_type_is_named(old, new, field, words):
    with pytest.raises(PlanError, match=f"{field}: must .*{words}"):
        parse_plan(_replace(SOUND, old, new))


@pytest.mark.parametrize("old, new, field", [
    ("n_gpus = 8", "n_gpus = -8", "deployment.n_gpus"),
    ("context_len = 8_192", "context_len = 0", "deployment.context_len"),
    ("reserve_fraction = 0.1", "reserve_fraction = -0.1", "deployment.reserve_fraction"),
    ("reserve_fraction = 0.1", "reserve_fraction = 10", "deployment.reserve_fraction"),
    ("n_params = 70_000_000_000", "n_params = -7e10", "deployment.n_params"),
    ("kv_bytes_per_token = 327_680", "kv_bytes_per_token = -1", "claims.kv_bytes_per_token"),
    ("prompt_len = 2_048", "prompt_len = -5", "workload.prompt_len"),
])
def test_negative_or_out_of_range_is_named(old, new, field):
    with pytest.raises(PlanError, match=field):
        parse_plan(_replace(SOUND, old, new))


@pytest.mark.parametrize("key", ["bytes_per_param", "kv_bytes_per_elem"])
def test_bytes_per_value_lies_between_one_bit_and_fp64(key):
    # Outside is no number format: it would overflow the memory arithmetic instead.
    text = _replace(SOUND, "n_params = 70_000_000_000", f"n_params = 70_000_000_000\n{key} = 1e300")
    with pytest.raises(PlanError, match=rf"deployment.{key}: must lie in \[0.125, 8\]"):
        parse_plan(text)
    with pytest.raises(PlanError, match=rf"deployment.{key}: must lie in \[0.125, 8\]"):
        parse_plan(text.replace("1e300", "1e-300"))
    parse_plan(text.replace("1e300", "8"))


def test_unknown_model_and_gpu_list_the_presets():
    with pytest.raises(PlanError, match=r"deployment.model: unknown model 'llama-5'.*llama-3-70b"):
        parse_plan(_replace(SOUND, "\"llama-3-70b\"", "\"llama-5\""))
    with pytest.raises(PlanError, match=r"deployment.gpu: unknown GPU 'h900'.*h100-sxm"):
        parse_plan(_replace(SOUND, "\"h100-sxm\"", "\"h900\""))


def test_unknown_key_and_table_are_named():
    with pytest.raises(PlanError, match="deployment.n_gpu: unknown key"):
        parse_plan(_replace(SOUND, "n_gpus = 8", "n_gpu = 8"))
    with pytest.raises(PlanError, match="^extras: unknown table"):
        parse_plan(SOUND + "\n[extras]\nx = 1\n")


def test_bad_choice_lists_the_choices():
    with pytest.raises(PlanError, match="serving.admission: must be one of final, prompt"):
        parse_plan(_replace(SOUND, "max_batch = 256", "max_batch = 256\nadmission = \"eager\""))


def test_cross_field_checks():
    with pytest.raises(PlanError, match=r"deployment.tp_degree: must divide deployment.n_gpus \(8\)"):
        parse_plan(_replace(SOUND, "tp_degree = 8", "tp_degree = 3"))
    with pytest.raises(PlanError, match="workload.prompt_len: must be shorter"):
        parse_plan(_replace(SOUND, "prompt_len = 2_048", "prompt_len = 9000"))


_INLINE_7_HEADS = """
[model]
name = "odd"
hidden_size = 7168
num_hidden_layers = 80
num_attention_heads = 7
num_key_value_heads = 7
intermediate_size = 28672
vocab_size = 128256
tie_word_embeddings = false
"""


@pytest.mark.parametrize("edit, field, words", [
    # Valid one by one, unplannable together: named up front, not a traceback from the roofline.
    (lambda t: t.replace("\"h100-sxm\"", "\"t4\""), "deployment.dtype", "'bf16' has no dense rate on t4"),
    (lambda t: t.replace("\"h100-sxm\"", "\"a100-80gb\"\ndtype = \"fp8\""), "deployment.dtype",
     "'fp8' has no dense rate on a100-80gb"),
    (lambda t: t + "\n[gpu]\nmemory_gib = 80\nbandwidth_GBps = 3350\ntflops = {fp32 = 67}\n",
     "deployment.dtype", "gpu.tflops gives fp32"),
    (lambda t: t.replace("n_gpus = 8", "n_gpus = 3").replace("tp_degree = 8", "tp_degree = 3"),
     "deployment.tp_degree", "8 KV heads"),
    (lambda t: t.replace("model = \"llama-3-70b\"\n", "") + _INLINE_7_HEADS, "deployment.tp_degree",
     "7 attention heads"),
    (lambda t: t.replace("capacity_tokens_per_month = 5_256_000_000", "capacity_tokens_per_month = 1e-300"),
     "ptu.capacity_tokens_per_month", "break-even utilisation overflows"),
    (lambda t: t.replace("engineering_fte = 0.25", "engineering_fte = 1e300").replace(
        "usd_per_fte_year = 180_000", "usd_per_fte_year = 1e300"), "self_hosting.engineering_fte", "overflows"),
])
def test_unplannable_combinations_are_named(edit, field, words):
    with pytest.raises(PlanError, match=f"^{field}: .*{words}"):
        parse_plan(edit(SOUND))


def test_broken_toml_and_missing_file():
    with pytest.raises(PlanError, match="^TOML"):
        parse_plan("[deployment\nmodel = 1")
    with pytest.raises(PlanError, match="nope.toml: cannot read"):
        load_plan("nope.toml")


def test_plan_error_is_a_value_error_with_the_field():
    with pytest.raises(ValueError) as e:
        parse_plan(_replace(SOUND, "n_gpus = 8", "n_gpus = 0"))
    assert e.value.field == "deployment.n_gpus"


@given(n_gpus=st.sampled_from([1, 2, 4, 8]), context=st.integers(4096, 131072),
       reserve=st.floats(0, 0.5), batch=st.integers(1, 1024))
def test_round_trip_through_toml(n_gpus, context, reserve, batch):
    import dataclasses
    plan = dataclasses.replace(sound_plan(), n_gpus=n_gpus, tp_degree=n_gpus, context_len=context,
                               reserve_fraction=reserve, max_batch=batch)
    assert parse_plan(plan_to_toml(plan)) == plan


def test_incomplete_money_tables_name_the_missing_field():
    with pytest.raises(PlanError, match=r"ptu.capacity_tokens_per_month: is required when the plan has a \[ptu\]"):
        parse_plan(_replace(SOUND, "capacity_tokens_per_month = 5_256_000_000\n", ""))
    with pytest.raises(PlanError, match=r"self_hosting.engineering_fte: is required"):
        parse_plan(_replace(SOUND, "engineering_fte = 0.25\n", ""))
    with pytest.raises(PlanError, match=r"self_hosting.cost_lines\[1\]: must be one of gpu-hours, engineering"):
        parse_plan(_replace(SOUND, '"engineering"]', '"lunch"]'))
    with pytest.raises(PlanError, match="workload.output_fraction: must lie in"):
        parse_plan(_replace(SOUND, "output_fraction = 0.25", "output_fraction = 25"))


# ---- any model, any GPU: [model] and [gpu] tables ------------------------------------------

def _write_plan(tmp_path, body):
    import pathlib
    import shutil
    data = pathlib.Path(__file__).parent / "data"
    (tmp_path / "configs").mkdir()
    for name in ("qwen3-30b-a3b", "glm-4-9b"):
        shutil.copy(data / f"{name}.json", tmp_path / "configs" / f"{name}.json")
    p = tmp_path / "plan.toml"
    p.write_text(body)
    return p


_BASE = """
[plan]
name = "custom"
[deployment]
n_gpus = 4
tp_degree = 4
context_len = 8192
reserve_fraction = 0.1
[workload]
prompt_len = 1024
[serving]
max_batch = 64
"""


def test_plan_reads_a_config_json_relative_to_the_plan_file(tmp_path):
    from servelib.audit import derive, load_plan
    p = _write_plan(tmp_path, _BASE.replace("n_gpus = 4", 'n_gpus = 4\ngpu = "a100-80gb"')
                    + '[model]\nconfig = "configs/qwen3-30b-a3b.json"\n')
    plan = load_plan(p)
    d = derive(plan)
    # The figures: 30.5B parameters, vLLM's 14.25 GiB of weights per rank at TP=4.
    assert round(d.weights_bytes / 1e9 / 2, 1) == 30.5
    assert round(d.weights_bytes / 4 / 2**30, 2) == pytest.approx(14.22, abs=0.01)
    assert d.kv_bytes_per_token == 98_304
    assert load_plan(p) == plan and parse_plan(plan_to_toml(plan), tmp_path) == plan


def test_plan_with_inline_config_and_gpu_table(tmp_path):
    import json
    from servelib.audit import derive
    glm = json.loads((_write_plan(tmp_path, "").parent / "configs" / "glm-4-9b.json").read_text())
    fields = "\n".join(f"{k} = {json.dumps(v)}" for k, v in glm.items())
    text = (_BASE.replace("n_gpus = 4", "n_gpus = 1").replace("tp_degree = 4", "tp_degree = 1")
            + "[model]\nname = \"glm-4-9b\"\n" + fields
            + "\n[gpu]\nmemory_gib = 48\nbandwidth_GBps = 864\n[gpu.tflops]\nbf16 = 181\n")
    plan = parse_plan(text)
    d = derive(plan)
    assert d.kv_bytes_per_token == 40_960                 # GLM-4's 2 KV groups, not 32 heads
    assert plan.gpu_spec().memory_bytes == 48 * 2**30 and plan.gpu_spec().peak_flops("bf16") == 181e12
    assert parse_plan(plan_to_toml(plan)) == plan


@pytest.mark.parametrize("extra,field,msg", [
    ('[model]\nnum_hidden_layers = 2\nhidden_size = 64\n', "model", "num_attention_heads"),
    ('[model]\nconfig = "missing.json"\n', "model.config", "cannot read"),
    ('[model]\nconfig = "configs/glm-4-9b.json"\nvocab_size = 3\n', "model.vocab_size", "not both"),
    ('[model]\nnum_hidden_layers = 2\nhidden_size = 64\nnum_attention_heads = 4\nvocab_size = 10\n'
     'attention_chunk_size = 8\n', "model", "attention_chunk_size"),
    ('[gpu]\nmemory_gib = 80\nbandwidth_GBps = 3350\n', "gpu.tflops", "required"),
    ('[gpu]\nmemory_gib = 80\nbandwidth_GBps = 3350\n[gpu.tflops]\nint4 = 1\n', "gpu.tflops.int4", "dtype"),
    ('[gpu]\nmemory_gb = 80\n', "gpu.memory_gb", "unknown key"),
])
def test_bad_or_partial_model_and_gpu_tables_name_the_field(tmp_path, extra, field, msg):
    from servelib.audit import PlanError, load_plan
    body = _BASE.replace("n_gpus = 4", 'n_gpus = 4\nmodel = "llama-3-8b"\ngpu = "h100-sxm"') + extra
    with pytest.raises(PlanError, match=msg) as info:
        load_plan(_write_plan(tmp_path, body))
    assert info.value.field == field
