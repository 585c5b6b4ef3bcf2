"""The pad's Landlock rules and environment, computed in the server (no kernel needed)."""

from __future__ import annotations

from pathlib import Path

from scratchpad.runtime.sandboxing import around, pad_environment, pad_rules


def test_descent_around_the_home_lists_ancestors_and_grants_their_other_entries(
    tmp_path: Path,
) -> None:
    (tmp_path / "a" / "home").mkdir(parents=True)
    (tmp_path / "a" / "sibling").mkdir()
    (tmp_path / "a" / "notes.txt").write_text("x")
    (tmp_path / "b").mkdir()
    rules = around(tmp_path, tmp_path / "a" / "home", "rw")
    assert rules == [
        (str(tmp_path), "list"),
        (str(tmp_path / "b"), "rw"),
        (str(tmp_path / "a"), "list"),
        (str(tmp_path / "a" / "notes.txt"), "rw"),
        (str(tmp_path / "a" / "sibling"), "rw"),
    ]


def test_a_tree_without_the_home_is_one_rule_and_a_tree_inside_it_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert around(tmp_path / "elsewhere", home, "ro") == [(str(tmp_path / "elsewhere"), "ro")]
    assert around(home / "pads", home, "rw") == []
    assert around(home, home, "rw") == []


def test_symlinks_into_or_above_the_home_are_left_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "vault").mkdir(parents=True)
    (tmp_path / "to_vault").symlink_to(home / "vault")
    (tmp_path / "to_root").symlink_to("/")
    (tmp_path / "plain").mkdir()
    granted = {path for path, mode in around(tmp_path, home, "ro") if mode != "list"}
    assert granted == {str(tmp_path / "plain")}


def test_pad_rules_with_the_home_inside_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    home = workspace / ".scratchpad"
    root = home / "pads" / "main"
    for name in ("bin", "lib", "include"):
        (root / name).mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "history.jsonl").write_text("")
    (workspace / "data").mkdir()
    (workspace / "README.md").write_text("x")
    rules = pad_rules(home=home, workspace=workspace, root=root, tmp=root / "tmp")
    modes = dict(reversed(rules))  # the first rule of a path wins here
    assert modes[str(workspace)] == "list"
    assert (str(workspace / "data"), "rw") in rules
    assert (str(workspace / "README.md"), "rw") in rules
    assert (str(root / "bin"), "rw") in rules and (str(root / "lib"), "rw") in rules
    assert (str(root / "pyvenv.cfg"), "ro") in rules
    assert (str(root / "tmp"), "rw") in rules and ("/dev", "rw") in rules
    assert not any(path in (str(home), str(root)) for path, _ in rules)
    assert not any(path.endswith(("history.jsonl", "pad.json")) for path, _ in rules)
    assert ("/", "list") in rules


def test_a_hidden_home_lets_the_whole_workspace_be_granted(tmp_path: Path) -> None:
    from scratchpad.config import Settings
    from scratchpad.runtime.sandboxing import hide_spec

    workspace = tmp_path / "ws"
    home = workspace / ".scratchpad"
    root = home / "pads" / "main"
    for name in ("bin", "lib"):
        (root / name).mkdir(parents=True)
    rules = pad_rules(home=home, workspace=workspace, root=root, tmp=root / "tmp", hidden=True)
    assert (str(workspace), "rw") in rules
    assert not any(path == str(home) or path.endswith("history.jsonl") for path, _ in rules)
    elsewhere = hide_spec(
        Settings(home=tmp_path / "home"), workspace=workspace, root=root, tmp=root / "tmp"
    )
    assert elsewhere is None  # a home outside the workspace: nothing to hide
    spec = hide_spec(Settings(home=home), workspace=workspace, root=root, tmp=root / "tmp")
    if spec is not None:  # where Landlock and namespaces are there
        assert spec["home"] == str(home.resolve())
        assert (str(root / "pyvenv.cfg"), False) in spec["keep"]  # type: ignore[operator]
        assert (str(root / "bin"), True) in spec["keep"]  # type: ignore[operator]
        assert not any("history" in path for path, _ in spec["keep"])  # type: ignore[attr-defined]


def test_pad_rules_with_the_home_outside_the_workspace(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    root = home / "pads" / "main"
    rules = pad_rules(home=home, workspace=workspace, root=root, tmp=root / "tmp")
    assert (str(workspace), "rw") in rules
    assert (str(tmp_path), "list") in rules


def test_the_environment_is_the_allowlist(tmp_path: Path) -> None:
    source = {
        "PATH": "/usr/bin",
        "LC_ALL": "C.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
        "SCRATCHPAD_API_KEY": "sk-server",
        "SCRATCHPAD_HOME": "/secret/home",
        "ANTHROPIC_API_KEY": "sk-ant",
        "PYTHONHOME": "/elsewhere",
        "PYTHONPATH": "/elsewhere",
        "LD_PRELOAD": "/evil.so",
    }
    env = pad_environment(source, root=tmp_path / "pad", tmp=tmp_path / "pad" / "tmp")
    assert env["PATH"] == f"{tmp_path / 'pad' / 'bin'}:/usr/bin"
    assert env["LC_ALL"] == "C.UTF-8" and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["TMPDIR"] == str(tmp_path / "pad" / "tmp")
    assert env["MPLCONFIGDIR"].startswith(env["TMPDIR"])
    assert env["PYTHONUTF8"] == "1" and env["VIRTUAL_ENV"] == str(tmp_path / "pad")
    for name in ("SCRATCHPAD_API_KEY", "SCRATCHPAD_HOME", "ANTHROPIC_API_KEY", "PYTHONHOME"):
        assert name not in env
    assert "PYTHONPATH" not in env and "LD_PRELOAD" not in env
