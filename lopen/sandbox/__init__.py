"""The model's sandbox (G7): what the model may touch, decided twice.

The Copilot CLI runs the model's tools — its `bash`, `create`, `edit`, `view` — with the
CLI's own rights. Lopen narrows them in two independent layers:

1. **The permission policy** (:mod:`lopen.sandbox.policy`). Every permission request the CLI
   sends (a write, a read, a shell command, a URL, an MCP call, …) is answered by a pure
   function, :func:`~lopen.sandbox.policy.decide`, and every answer is reported so the workflow
   records it. Writes only inside the worktree and the temp folder; no reads of Lopen's state,
   the approved spec or well-known secret files; URLs only when allowed; no MCP.
2. **The kernel sandbox** (:mod:`lopen.sandbox.kernel`). The CLI process itself — and so every
   command the model runs — is started confined: under bubblewrap (:mod:`lopen.sandbox.bwrap`)
   where it works, else under Landlock (:mod:`lopen.sandbox.landlock`), else not at all, with
   one clear warning (the policy still applies).
3. **The network** (bubblewrap; Landlock from ABI 4). Under bubblewrap the sandbox has a network
   namespace of its own; its one way out is Lopen's proxy (:mod:`lopen.sandbox.proxy`), reached
   through a forwarder inside (:mod:`lopen.sandbox.forward`) and allowing only the model provider
   and ``sandbox.allow_network`` (:mod:`lopen.sandbox.network`). Under Landlock the same proxy
   listens on a loopback TCP port, the one port (with a loopback provider's) the sandbox may
   connect to; it binds none.

Alongside them, :mod:`lopen.sandbox.environment` builds the CLI's environment from an
allowlist, so Lopen's secrets are not in the model's shell, and registers the secret values
Lopen knows for redaction. :mod:`lopen.sandbox.paths` knows which paths are sensitive.

Nothing here imports the Copilot SDK at module level: the policy's SDK adapter imports it
when a gateway builds a permission handler.
"""

from lopen.sandbox.config import Mode, SandboxConfig

__all__ = ["Mode", "SandboxConfig"]
