"""The install decision of the README's two commands (agents_ide/system_parts.py): a missing system part is installed
when that asks nothing — as root, or with sudo that needs no password, where apt-get or dnf exists — and otherwise the
command stops with the one command to type. Decided on described machines; nothing here touches this one's packages."""

import io

import pytest

from agents_ide import system_parts
from agents_ide.system_parts import PARTS, Machine, decide
from tests import system_needs

BWRAP, CHROMIUM, NODE = PARTS["bubblewrap"], PARTS["chromium"], PARTS["node"]


def machine(**kw) -> Machine:
    return Machine(**{"uid": 1000, "sudo_without_password": False, "managers": ("apt-get",), **kw})


def test_root_with_apt_installs_every_missing_part_in_one_command():
    decision = decide([BWRAP, CHROMIUM, NODE], machine(uid=0))
    assert decision.install == (("apt-get", "install", "-y", "-q", "bubblewrap", "chromium", "nodejs", "npm"),)
    assert decision.env == {"DEBIAN_FRONTEND": "noninteractive"}
    assert decision.refresh == ("apt-get", "update", "-q")  # only if the first try fails (stale package lists)
    assert decision.command == "apt-get install -y bubblewrap chromium nodejs npm"


def test_sudo_without_a_password_installs_through_sudo_n():
    decision = decide([BWRAP], machine(sudo_without_password=True))
    assert decision.install == (
        ("sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "bubblewrap"),
    )
    assert decision.command == "sudo apt-get install -y bubblewrap"


def test_neither_root_nor_passwordless_sudo_installs_nothing_and_says_the_command():
    decision = decide([BWRAP, CHROMIUM], machine())
    assert decision.install == ()
    assert decision.command == "sudo apt-get install -y bubblewrap chromium"
    assert "sudo asks for a password" in decision.reason


def test_in_ci_as_root_refreshes_the_package_lists_first():
    decision = decide([CHROMIUM], machine(uid=0, in_ci=True))
    assert decision.install == (
        ("apt-get", "update", "-q"),
        ("apt-get", "install", "-y", "-q", "chromium"),
    )


def test_in_ci_without_root_or_sudo_it_still_stops_with_the_command():
    decision = decide([BWRAP], machine(in_ci=True))
    assert decision.install == () and decision.command == "sudo apt-get install -y bubblewrap"


def test_install_turned_off_or_no_package_manager_says_the_command():
    off = decide([BWRAP], machine(uid=0, install_allowed=False))
    assert off.install == () and "AIDE_INSTALL_SYSTEM_DEPS=0" in off.reason
    assert off.command == "apt-get install -y bubblewrap"
    bare = decide([BWRAP], machine(uid=0, managers=()))
    assert bare.install == () and "no apt-get or dnf" in bare.reason


def test_dnf_is_used_where_apt_get_is_not():
    decision = decide([BWRAP, NODE], machine(uid=0, managers=("dnf",)))
    assert decision.install == (("dnf", "install", "-y", "-q", "bubblewrap", "nodejs"),)
    assert decision.refresh == ()


def test_nothing_missing_decides_nothing():
    assert decide([], machine()).install == () and decide([], machine()).command == ""


def test_provide_reports_what_is_still_missing_with_the_command(monkeypatch):
    monkeypatch.setattr(system_parts.Part, "present", lambda self: self.name != "chromium")
    out = io.StringIO()
    missing = system_parts.provide(["bubblewrap", "chromium"], machine=machine(), out=out)
    assert [part.name for part in missing] == ["chromium"]
    assert "Missing: chromium (the browser tests)" in out.getvalue()
    assert "    sudo apt-get install -y chromium" in out.getvalue()


def test_serve_needs_bubblewrap_unless_tools_run_elsewhere():
    assert system_parts.needed_for_serve({}) == ["bubblewrap"]
    assert system_parts.needed_for_serve({"SANDBOX_DEFAULT": "e2b"}) == []
    assert system_parts.needed_for_serve({"SANDBOX_LOCAL_WEAK_ISOLATION": "1"}) == []


@pytest.mark.parametrize(
    ("args", "narrow"),
    [
        ([], False),
        (["-q"], False),
        (["-q", "-x", "--lf"], False),
        (["-k", "sandbox"], True),
        (["-m", "slow"], True),
        (["tests/core/engine"], True),
        (["tests/e2e/test_ide.py::test_workspace"], True),
    ],
)
def test_a_run_is_narrowed_by_a_path_a_keyword_or_a_marker(args, narrow):
    assert system_parts.narrows(args) is narrow


def test_the_needs_of_a_chosen_run():
    assert system_needs.needs_of_args(["-q"]) == set(PARTS)  # the whole suite
    assert system_needs.needs_of_args(["tests/core/engine"]) == set()
    assert system_needs.needs_of_args(["tests/e2e/test_ide.py"]) == {"chromium", "bubblewrap"}
    assert system_needs.needs_of_args(["tests/clients"]) == {"node", "bubblewrap"}
    assert system_needs.needs_of("tests/tools/test_api.py::test_run", []) == {"bubblewrap"}
    assert system_needs.needs_of("tests/core/engine/test_loop.py::test_x", []) == set()


def test_main_stops_a_whole_test_run_when_a_part_cannot_be_installed(monkeypatch, capsys):
    monkeypatch.setattr(system_parts.Part, "present", lambda self: self.name != "node")
    monkeypatch.setattr(system_parts.Machine, "here", classmethod(lambda cls: machine()))
    assert system_parts.main(["test", "-q"]) == 1
    assert "sudo apt-get install -y nodejs npm" in capsys.readouterr().err
    assert system_parts.main(["test", "tests/core/engine"]) == 0  # a chosen run works out its own needs
