"""Where the book runs, and the companion libraries it pins: facts that setup (which installs) and errors
(which advises) both need, kept below both so that neither imports the other.

Standard library only, like setup: it is loaded before anything else is installed.
"""

from __future__ import annotations

import os
import sys

#: Libraries of the training and many-hosts chapters that Colab ships built for its own, older JAX. On
#: Colab each one installed at another version is replaced by the version the book is executed with
#: (requirements.txt pins the same; a test keeps them equal). Elsewhere they are the learner's business.
COMPANIONS = {"flax": "0.12.12", "optax": "0.2.8", "orbax-checkpoint": "0.12.8"}
#: The pip command that installs :data:`COMPANIONS` outside Colab.
COMPANIONS_PIP = "pip install " + " ".join(f"{name}=={version}" for name, version in COMPANIONS.items())


def in_colab() -> bool:
    """Whether this Python runs inside a Google Colab runtime."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ
