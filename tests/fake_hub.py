"""A local stand-in for the Hub's upload API, for tests (no Hub is reachable here).

``install(root)`` patches ``huggingface_hub.HfApi.create_repo``, ``create_branch`` and
``upload_folder``: uploads land in ``root/<namespace>/<name>/<branch>/`` (the ignore/allow
patterns applied by huggingface_hub's own filter), and every call is appended to
``root/calls.jsonl`` (method, repo, private, token, revision, ...) so a test can check what a
push asked for. A repository id without a namespace gets the namespace ``user``, as the Hub
gives the token owner's.

In a subprocess: ``python -c "import fake_hub; fake_hub.install(ROOT); import runpy;
runpy.run_path(SCRIPT, run_name='__main__')" args...`` (with ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

USER = "user"


def _full_id(repo_id: str) -> str:
    return repo_id if "/" in repo_id else f"{USER}/{repo_id}"


def install(root: str | Path) -> Path:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoUrl
    from huggingface_hub.utils import filter_repo_objects

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)

    def record(method, **fields):
        with open(root / "calls.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"method": method, **fields}, default=str) + "\n")

    def create_repo(self, repo_id, *, token=None, private=None, repo_type=None, exist_ok=False,
                    **kwargs):  # fmt: skip
        repo_id = _full_id(repo_id)
        existed = (root / repo_id).is_dir()
        if existed and not exist_ok:
            raise RuntimeError(f"{repo_id} exists")
        (root / repo_id / "main").mkdir(parents=True, exist_ok=True)
        record("create_repo", repo_id=repo_id, private=private, token=token or self.token,
               repo_type=repo_type, existed=existed)  # fmt: skip
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def create_branch(self, repo_id, *, branch, revision=None, token=None, repo_type=None,
                      exist_ok=False):  # fmt: skip
        repo_id = _full_id(repo_id)
        target = root / repo_id / branch
        if not target.exists():
            shutil.copytree(root / repo_id / (revision or "main"), target)
        record("create_branch", repo_id=repo_id, branch=branch, token=token or self.token)

    def upload_folder(self, *, repo_id, folder_path, path_in_repo=None, commit_message=None,
                      revision=None, allow_patterns=None, ignore_patterns=None, token=None,
                      repo_type=None, **kwargs):  # fmt: skip
        repo_id = _full_id(repo_id)
        branch = root / repo_id / (revision or "main")
        if not branch.is_dir():
            raise RuntimeError(f"{repo_id}: no branch {revision!r}")
        folder = Path(folder_path)
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        kept = list(filter_repo_objects(files, allow_patterns=allow_patterns,
                                        ignore_patterns=ignore_patterns))  # fmt: skip
        for rel in kept:
            dest = branch / (path_in_repo or "") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / rel, dest)
        record("upload_folder", repo_id=repo_id, revision=revision, files=kept,
               commit_message=commit_message, token=token or self.token)  # fmt: skip
        url = f"https://huggingface.co/{repo_id}/commit/0123abcd"
        return types.SimpleNamespace(commit_url=url, oid="0123abcd")

    HfApi.create_repo = create_repo
    HfApi.create_branch = create_branch
    HfApi.upload_folder = upload_folder
    return root


def calls(root: str | Path) -> list[dict]:
    path = Path(root) / "calls.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
