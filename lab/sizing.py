"""How the lab sizes a fleet against its SLO: one definition for the demo and the backtest.

Both read these numbers, and the demo's settings are imported by the backtest's trace reader, so they
live here, below both (`lab.backtest.calibration` and `lab.demo.settings` import them; neither is
imported back).
"""

from __future__ import annotations

from typing import Final

from adapter.vocabulary.catalogue import FORECAST_WINDOW_SECONDS

#: The share of capacity a replica takes at the knee where TPOT does not bind first: above it the
#: queue of a Poisson load stops being stable. The in-flight requests at this share are the knee of
#: the capacity model (the `capacity` of `vllm_saturation` when no profile gives one).
KNEE_SHARE: Final = 0.9

#: The anticipating policy's scale-down stabilization window (seconds): the history its forecast reads
#: (the rate over one window, compared with the window before). A reactive signal keeps replicas for
#: the default 300 s because it cannot see a rebound coming; the forecast sees a rise one sync period
#: plus one cold start ahead, so it keeps a replica only while the traffic that asked for it is still in
#: what it reads. It is longer than that horizon (75 s at a 60 s cold start), so a replica it lets go
#: would be back before a rise the forecast saw could reach it.
ANTICIPATE_SCALE_DOWN_SECONDS: Final = 2 * FORECAST_WINDOW_SECONDS
