"""``python -m servelib plan.toml``: the report, and exit statuses 0, 1 and 2."""
import pathlib
import subprocess
import sys

from servelib.audit import plan_to_toml
from servelib.audit.examples import mistake_plans, sound_plan

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*paths):
    return subprocess.run([sys.executable, "-m", "servelib", *map(str, paths)], capture_output=True,
                          text=True, cwd=ROOT)


def test_sound_plan_prints_figures_and_exits_0(tmp_path):
    p = tmp_path / "sound.toml"
    p.write_text(plan_to_toml(sound_plan()))
    r = run(p)
    assert r.returncode == 0, r.stderr
    for text in ("weights             130.4 GiB", "KV per token        320 KiB",
                 "KV per sequence     2.5 GiB at 8,192 tokens", "183 conversations",
                 "2 fits; 8 meets the target", "predicted TTFT", "predicted TPOT", "PTU break-even",
                 "Audit: no mistakes found"):
        assert text in r.stdout


def test_a_mistake_exits_1_and_names_its_code(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text(plan_to_toml(mistake_plans()["no-working-reserve"]))
    r = run(p)
    assert r.returncode == 1
    assert "[no-working-reserve]" in r.stdout and "wrong: 203 conversations; right: 183" in r.stdout


def test_invalid_plan_exits_2_naming_the_field(tmp_path):
    p = tmp_path / "invalid.toml"
    p.write_text(plan_to_toml(sound_plan()).replace("n_gpus = 8", "n_gpus = -8"))
    r = run(p)
    assert r.returncode == 2
    assert "deployment.n_gpus" in r.stderr and r.stdout == ""


def test_missing_file_exits_2():
    r = run("no-such-plan.toml")
    assert r.returncode == 2 and "no-such-plan.toml" in r.stderr


def test_invalid_plan_wins_over_findings(tmp_path):
    bad, invalid = tmp_path / "bad.toml", tmp_path / "invalid.toml"
    bad.write_text(plan_to_toml(mistake_plans()["queue-never-fits"]))
    invalid.write_text("[plan]\nname = \"x\"\n")
    assert run(bad, invalid).returncode == 2


def test_unplannable_plans_exit_2_naming_the_field(tmp_path):
    # Each once ended in a traceback (or an endless loop) instead of a usage error.
    sound = plan_to_toml(sound_plan())
    cases = {"deployment.dtype": sound.replace("\"h100-sxm\"", "\"a100-80gb\"\ndtype = \"fp8\""),
             "deployment.tp_degree": sound.replace("n_gpus = 8", "n_gpus = 3").replace("tp_degree = 8", "tp_degree = 3"),
             "ptu.capacity_tokens_per_month": sound.replace("capacity_tokens_per_month = 5_256_000_000",
                                                            "capacity_tokens_per_month = 1e-300")}
    for field, text in cases.items():
        p = tmp_path / "plan.toml"
        p.write_text(text)
        r = subprocess.run([sys.executable, "-m", "servelib", str(p)], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
        assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_a_huge_engineering_line_ends_with_no_crossover(tmp_path):
    p = tmp_path / "plan.toml"
    p.write_text(plan_to_toml(sound_plan()).replace("engineering_fte = 0.25", "engineering_fte = 1e300"))
    r = subprocess.run([sys.executable, "-m", "servelib", str(p)], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "crossover           none: self-hosting never costs less than pay-as-you-go" in r.stdout
