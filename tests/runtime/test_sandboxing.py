"""The pad's Landlock rules and environment, computed in the server (no kernel needed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from scratchpad.runtime.sandboxing import (
    PadPaths,
    around,
    blocked_ancestors,
    pad_environment,
    pad_rules,
    pad_view,
)


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


def pad_layout(workspace: Path, home: Path) -> PadPaths:
    root = home / "pads" / "main"
    for name in ("bin", "lib", "include", "tmp"):
        (root / name).mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "history.jsonl").write_text("")
    workspace.mkdir(exist_ok=True)
    return PadPaths(home=home, workspace=workspace, root=root, tmp=root / "tmp")


def test_landlock_alone_descends_around_the_home_inside_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    paths = pad_layout(workspace, workspace / ".scratchpad")
    root = paths.root
    (workspace / "data").mkdir()
    (workspace / "README.md").write_text("x")
    rules = pad_rules(paths, namespaces=False)
    modes = dict(reversed(rules))  # the first rule of a path wins here
    assert modes[str(workspace)] == "list"
    assert (str(workspace / "data"), "rw") in rules
    assert (str(workspace / "README.md"), "rw") in rules
    assert (str(root / "bin"), "rw") in rules and (str(root / "lib"), "rw") in rules
    assert (str(root / "pyvenv.cfg"), "ro") in rules
    assert (str(root / "tmp"), "rw") in rules
    assert not any(path in (str(paths.home), str(root)) for path, _ in rules)
    assert not any(path.endswith(("history.jsonl", "pad.json")) for path, _ in rules)
    assert ("/", "list") in rules


def test_landlock_alone_grants_only_the_harmless_devices(tmp_path: Path) -> None:
    """No rule covers /dev as a whole: block devices and the user's terminals stay shut."""
    paths = pad_layout(tmp_path / "ws", tmp_path / "home")
    rules = pad_rules(paths, namespaces=False)
    devices = {path for path, _ in rules if path.startswith("/dev")}
    assert devices == {
        f"/dev/{name}" for name in ("null", "zero", "full", "random", "urandom", "shm")
    }
    assert not any(path == "/dev" for path, _ in rules)


def test_landlock_alone_keeps_the_servers_code_inside_the_workspace_read_only(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    code = workspace / "src" / "pkg"
    code.mkdir(parents=True)
    paths = replace(pad_layout(workspace, tmp_path / "home"), server=(code,))
    rules = pad_rules(paths, namespaces=False)
    assert (str(workspace), "list") in rules and (str(workspace / "src"), "list") in rules
    assert not any(path == str(code) for path, _ in rules)


def test_landlock_alone_gives_a_workspace_inside_a_guarded_directory_and_nothing_else_of_it(
    tmp_path: Path,
) -> None:
    """An agent's pads: the agent directory is guarded, its workspace theirs."""
    agent = tmp_path / "agent"
    (agent / "logs").mkdir(parents=True)
    (agent / "config.yaml").write_text("x")
    paths = replace(pad_layout(agent / "workspace", agent / ".scratchpad"), guarded=(agent,))
    rules = pad_rules(paths, namespaces=False)
    assert (str(agent / "workspace"), "rw") in rules
    granted = [path for path, _ in rules if Path(path).is_relative_to(agent)]
    assert all(
        Path(path).is_relative_to(agent / "workspace")
        or Path(path).is_relative_to(agent / ".scratchpad" / "pads")
        for path in granted
    ), granted


def test_with_namespaces_the_rules_are_read_only_everywhere_but_the_pads_own(
    tmp_path: Path,
) -> None:
    paths = pad_layout(tmp_path / "ws", tmp_path / "home")
    rules = pad_rules(paths, namespaces=True)
    assert rules[0] == ("/", "ro") and rules[-1] == ("/dev", "rw")
    assert (str(paths.workspace), "rw") in rules and (str(paths.root / "bin"), "rw") in rules


def test_the_view_hides_the_home_and_brings_back_the_pads_directories(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    home = workspace / ".scratchpad"
    paths = pad_layout(workspace, home)
    view = pad_view(paths)
    root = paths.root
    assert view[0] == ("hide", str(home))
    assert ("rw", str(root / "bin")) in view and ("rw", str(root / "tmp")) in view
    assert ("ro", str(root / "pyvenv.cfg")) in view
    assert not any(path.endswith(("history.jsonl", "pad.json")) for _, path in view)
    assert not any(path == str(workspace) for _, path in view)  # granted as it is


def test_the_view_pins_the_way_to_what_it_hides_inside_the_workspace(tmp_path: Path) -> None:
    """Directories on the way to the home or the server's code cannot be renamed (they are
    mount points), so nothing forged can be put in their place."""
    workspace = tmp_path / "ws"
    home = workspace / "a" / "b" / ".scratchpad"
    paths = pad_layout(workspace, home)
    code = workspace / "repo" / "src"
    code.mkdir(parents=True)
    view = pad_view(replace(paths, server=(code,)))
    assert ("pin", str(workspace / "a")) in view and ("pin", str(workspace / "a" / "b")) in view
    assert ("hide", str(home)) in view
    assert ("pin", str(workspace / "repo")) in view and ("ro", str(code)) in view
    order = [path for _, path in view]
    assert order.index(str(workspace / "a")) < order.index(str(home))


def test_a_view_for_another_identity_hides_what_it_cannot_pass_and_idmaps_its_own(
    tmp_path: Path,
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    workspace = private / "ws"
    paths = pad_layout(workspace, tmp_path / "home")
    identity = (64000, 64000)
    view = pad_view(paths, identity)
    hidden = [Path(path) for kind, path in view if kind == "hide"]
    blocked = blocked_ancestors([workspace], *identity)
    assert blocked and set(blocked) <= set(hidden)  # only what the pad needs shows in them
    assert ("rw", str(workspace)) in view  # bound back (idmapped: writable as the pad)
    home = tmp_path / "home"
    assert home in hidden or any(tree in home.parents for tree in hidden)  # out of sight


def test_an_identity_gets_its_workspace_idmapped_where_it_lies(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    paths = pad_layout(tmp_path / "ws", tmp_path / "home")
    assert ("rw", str(paths.workspace)) in pad_view(paths, (64000, 64000))
    assert ("rw", str(paths.workspace)) not in pad_view(paths)


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
