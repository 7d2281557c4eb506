"""A learned screen of a search's samples: which of many drawn placements are worth timing.

Around an incumbent, a search's samples each move a few decision groups, and most of them are slower
than the incumbent: every one timed spends an evaluation of the budget (a simulation, or seconds of
real training steps). :class:`MoveScreen` learns, from the placements the search has timed already,
a model of how each group's device changes the step, and ranks freshly drawn candidates by it, so that
a search can draw ``M`` times its batch and time only the ``B`` the model ranks best (fine-tuning's
revision 17, ``screen``). Nothing it ranks is timed or counted: it only chooses.

The model is ridge regression of the log step time on the one-hot device of every decision group,
fit on the last ``window`` distinct placements timed (kernel form, so its cost grows with the window,
not with the groups times the devices):

.. math::
    \\log T(x) \\approx \\mu + w^\\top (\\phi(x) - \\bar\\phi), \\qquad
    w = \\Phi_c^\\top (\\Phi_c \\Phi_c^\\top + \\lambda I)^{-1} (y - \\mu)

with :math:`\\phi(x) \\in \\{0, 1\\}^{G D}` the device of each group, :math:`\\Phi_c` the centred
features of the window and :math:`y` their log step times. It is the first-order term of the
surrogate models of Bayesian optimisation over combinatorial structures (BOCS, Baptista and Poloczek,
ICML 2018). On six of the fine-tuning pairs of ``bench.py finetune``, fit on a run's timed
placements and asked to rank the next 96, it put its top six at the 10th-40th percentile of their
actual step times (50th would be chance); the group's majority device ranked as well as the share of
its work on each device, and per-device loads added nothing (``docs/measured-real-devices.md``).

With ``residual`` the screen starts from a cheaper model of the same step, the calibrated simulator
beside a real timer (``gnplace profile``'s cluster and op seconds), and learns only what it gets
wrong: the targets are :math:`\\log T(x) - \\log \\hat T(x)` and the ranking is by
:math:`\\log \\hat T(x)` plus the learned correction, so it ranks from the first batch, before any
placement is timed. Spotlight and the hierarchical planner timed every sample on the devices;
the simulator, about a millisecond a placement, picks which are worth the seconds of real steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnplace.exceptions import InvalidArgument

__all__ = ["MoveScreen"]

_blas: Any = None  # threadpoolctl's controller of the BLAS libraries loaded, made at the first prediction


def _one_blas_thread() -> Any:
    """A context in which the BLAS under numpy's linear algebra runs on one thread (threadpoolctl).

    The screen's system is small (at most ``window`` = 256 unknowns): one thread solves it in about
    0.7 ms, where OpenBLAS's default of a thread per core took 80 ms whenever the cores were busy
    (its threads spin, here beside a search's other work or another worker), and its sums, and so its
    rankings, then depended on the machine's cores.
    """
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController()
    return _blas.limit(limits=1, user_api="blas")


class MoveScreen:
    """Online ridge regression of log step time on each decision group's device (see the module docstring).

    Args:
        num_groups (int): decision groups ``G``.
        num_devices (int): devices ``D``.
        window (int, optional): most recent distinct placements it is fit on (default: 256).
        ridge (float, optional): the ridge :math:`\\lambda` (default: 1.0).
        least (int, optional): placements it must have seen before it ranks (:attr:`ready`) (default: 32).
        residual (bool, optional): learn the residual over a base prediction of log step seconds, given to
            :meth:`observe` and :meth:`predict` as ``base``, and rank from the start (default: :obj:`False`).

    Examples:
        >>> screen = MoveScreen(num_groups=3, num_devices=2, least=4)
        >>> x = (np.arange(8)[:, None] >> np.arange(3)) & 1  # the 8 placements of 3 groups on 2 devices
        >>> screen.observe(x, np.exp(1.0 + 0.5 * x[:, 0]), np.zeros(8, dtype=bool))  # group 0 on device 1 is slow
        >>> screen.ready, screen.rank(np.array([[1, 0, 0], [0, 0, 0]])).tolist()
        (True, [1, 0])
    """

    def __init__(self, num_groups: int, num_devices: int, *, window: int = 256, ridge: float = 1.0,
                 least: int = 32, residual: bool = False) -> None:
        if num_groups < 1 or num_devices < 1:
            raise InvalidArgument(f"MoveScreen needs groups and devices, got {num_groups} and {num_devices}")
        if window < 2 or least < 2 or ridge <= 0:
            raise InvalidArgument(f"MoveScreen needs window >= 2, least >= 2 and ridge > 0, got {window}, {least} "
                                  f"and {ridge}")
        if least > window and not residual:  # it keeps at most `window` placements: it would never rank
            raise InvalidArgument(f"MoveScreen needs least <= window (it keeps the last {window} placements), got "
                                  f"least {least}")
        self.num_groups, self.num_devices = int(num_groups), int(num_devices)
        self.window, self.ridge, self.least = int(window), float(ridge), int(least)
        self.residual = bool(residual)
        self._rows: dict[bytes, float] = {}  # device per group (bytes) -> log step seconds, oldest first

    def __len__(self) -> int:
        """Distinct placements in the window."""
        return len(self._rows)

    @property
    def ready(self) -> bool:
        """Whether it ranks: it has seen ``least`` placements, or it corrects a base prediction (``residual``).

        Before, a search times what it draws.
        """
        return self.residual or len(self._rows) >= self.least

    def observe(self, group_devices: np.ndarray, step: np.ndarray, oom: np.ndarray,
                base: np.ndarray | None = None) -> None:
        """Learn from timed placements: a device per group ``[B, G]``, their step times ``[B]`` (seconds), OOM ``[B]``.

        An OOM placement is not learned from (its step says nothing of its penalty); one seen before is
        not learned twice. The oldest leave the window first. With :attr:`residual`, ``base`` is the base
        model's log step seconds of each placement ``[B]``, and a placement it cannot predict (``inf``:
        out of memory by it) is not learned from either.
        """
        rows = np.ascontiguousarray(group_devices, dtype=np.int64).reshape(-1, self.num_groups)
        offset = self._base(base, rows.shape[0])
        for row, seconds, over, b in zip(rows, np.asarray(step, dtype=np.float64), np.asarray(oom, dtype=bool), offset):
            key = row.tobytes()
            if over or not np.isfinite(seconds) or seconds <= 0 or not np.isfinite(b) or key in self._rows:
                continue
            self._rows[key] = float(np.log(seconds) - b)  # y = log T, or log T - log T_hat with a base
            if len(self._rows) > self.window:
                del self._rows[next(iter(self._rows))]

    def _base(self, base: np.ndarray | None, count: int) -> np.ndarray:
        """The base log seconds of ``count`` placements (zeros without :attr:`residual`), ``[count]``."""
        if self.residual != (base is not None):
            raise InvalidArgument("a residual MoveScreen needs the base model's log step seconds, and only it takes "
                                  "them")
        if base is None:
            return np.zeros(count)
        offset = np.asarray(base, dtype=np.float64).reshape(-1)
        if offset.shape[0] != count:
            raise InvalidArgument(f"base has {offset.shape[0]} values for {count} placements")
        return offset

    def _seen(self) -> np.ndarray:
        """The window's placements, a device per group, ``[n, G]``."""
        return np.frombuffer(b"".join(self._rows), dtype=np.int64).reshape(-1, self.num_groups)

    def _features(self, group_devices: np.ndarray) -> np.ndarray:
        """phi(x): the one-hot device of every group, ``[B, G * D]`` float64."""
        rows = np.asarray(group_devices, dtype=np.int64).reshape(-1, self.num_groups)
        phi = np.zeros((rows.shape[0], self.num_groups * self.num_devices))
        phi[np.arange(rows.shape[0])[:, None], np.arange(self.num_groups)[None, :] * self.num_devices + rows] = 1.0
        return phi

    def predict(self, group_devices: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        """The model's log step seconds of placements given as a device per group ``[B, G]``, ``[B]``.

        With :attr:`residual`, ``base`` is the base model's log step seconds of each ``[B]``, and the
        prediction is it plus the learned correction.
        """
        count = np.asarray(group_devices).reshape(-1, self.num_groups).shape[0]
        offset = self._base(base, count)
        if not self._rows:
            return offset
        seen = self._seen()
        y = np.fromiter(self._rows.values(), dtype=np.float64, count=len(self._rows))
        phi = self._features(seen)
        mean_phi, mu = phi.mean(axis=0), y.mean()
        centred = phi - mean_phi  # Phi_c
        with _one_blas_thread():
            # alpha = (Phi_c Phi_c^T + lambda I)^-1 (y - mu)
            alpha = np.linalg.solve(centred @ centred.T + self.ridge * np.eye(len(y)), y - mu)
            w = centred.T @ alpha  # w = Phi_c^T alpha
            return offset + (self._features(group_devices) - mean_phi) @ w + mu

    def rank(self, group_devices: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        """Indices of the placements ``[B, G]``, the fastest by the model first (ties in the given order), ``[B]``.

        ``base`` as for :meth:`predict`.
        """
        return np.argsort(self.predict(group_devices, base), kind="stable")

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the window's placements and log step times (lists), and :attr:`residual`."""
        return {"groups": self._seen().tolist(), "log_step": list(self._rows.values()), "residual": self.residual}

    def restore(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`state` kept.

        Raises:
            InvalidArgument: if ``state`` does not fit this screen (another number of groups, a device outside
                its devices) or is malformed (not one finite log step per placement); the screen is left as it was.
        """
        try:
            groups = np.asarray(state.get("groups", []), dtype=np.int64)
            log_step = np.asarray(state.get("log_step", []), dtype=np.float64).reshape(-1)
        except (AttributeError, TypeError, ValueError, OverflowError) as err:  # edited: ragged, not numbers, huge
            raise InvalidArgument(f"a MoveScreen state is malformed ({type(err).__name__}: {err})") from err
        groups = groups.reshape(0, self.num_groups) if groups.size == 0 else groups
        if groups.ndim != 2 or groups.shape[1] != self.num_groups:  # another pair's screen
            raise InvalidArgument(f"a MoveScreen state is malformed ({groups.shape[-1] if groups.ndim else 0} devices "
                                  f"for {self.num_groups} groups)")
        if groups.size and (groups.min() < 0 or groups.max() >= self.num_devices):
            bad = int(groups.min()) if groups.min() < 0 else int(groups.max())
            raise InvalidArgument(f"a MoveScreen state has device {bad} outside 0..{self.num_devices - 1}")
        if groups.shape[0] != log_step.shape[0]:
            raise InvalidArgument(f"a MoveScreen state has {groups.shape[0]} placements and {log_step.shape[0]} log "
                                  "steps")
        if not np.isfinite(log_step).all():
            raise InvalidArgument("a MoveScreen state has a log step that is not finite")
        self.residual = bool(state.get("residual", False))
        self._rows = {row.tobytes(): float(y) for row, y in zip(groups, log_step)}
