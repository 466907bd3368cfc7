"""A prefill-decode pair's two replicas, as the fleet model (`lab.backtest.fleet`) serves requests.

A prefill pod's request is the prefill of a reference prompt; a decode pod's the generation of a
reference output after the KV hand-over. `PairModel.measured` builds both from what a P/D profile
measures (`lab.profile.pd.schema`); `lab.backtest.pools.replay` plays traffic through them.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.backtest.calibration import ServiceModel
from lab.sizing import KNEE_SHARE


@dataclass(frozen=True)
class PairModel:
    """One prefill pod and one decode pod of a P/D pair, as the fleet model serves requests."""

    prefill: ServiceModel
    """A request is a prompt of `prefill.output_tokens` tokens (the reference prompt: the fleet's cost
    of a tick is its prompt tokens over it, as `expand` reads a history's token series)."""
    decode: ServiceModel
    """A request is the generation of `decode.output_tokens` tokens after its hand-over."""
    handover: float
    """Seconds from a prompt's prefill ending to its KV on the decode pod (the connector's transfer)."""

    @property
    def prompt_tokens(self) -> float:
        return self.prefill.output_tokens

    @property
    def prefill_throughput(self) -> float:
        """Prompt tokens per second one prefill pod computes when saturated."""
        return self.prefill.capacity * self.prefill.output_tokens

    @classmethod
    def measured(
        cls,
        *,
        prefill_throughput: float,
        prefill_alone: float,
        prefill_slots: float,
        prompt_tokens: float,
        tpot_base: float,
        tpot_per_request: float,
        decode_slots: float,
        output_tokens: float,
        handover: float,
        kv_per_request: float,
    ) -> PairModel:
        """The pair from what a P/D profile measures (`lab.profile.pd.schema`): a prefill of the
        reference prompt takes `prefill_alone` seconds alone and the pod computes `prefill_throughput`
        tokens/s with `prefill_slots` prompts at once; a decode step takes `tpot_base +
        tpot_per_request x batch`, at most `decode_slots` running."""
        capacity = prefill_throughput / prompt_tokens
        full = prefill_slots / capacity
        # d(b) = k (shape + b) through d(0) = alone and d(slots) = full (Little's law at saturation).
        shape = prefill_alone * prefill_slots / (full - prefill_alone) if full > prefill_alone else 0.0
        k = full / (shape + prefill_slots)
        prefill = ServiceModel(
            capacity,
            prefill_slots,
            shape=shape,
            ttft_base=k * shape,
            ttft_slope=k,
            output_tokens=prompt_tokens,
        )
        # A request holds a decode slot for its output tokens at the batch's TPOT: d(b) = O (a + c b).
        full_decode = output_tokens * (tpot_base + tpot_per_request * decode_slots)
        decode = ServiceModel(
            decode_slots / full_decode,
            decode_slots,
            shape=tpot_base / tpot_per_request if tpot_per_request > 0 else 1e6,
            ttft_base=tpot_base,
            ttft_slope=tpot_per_request,
            output_tokens=output_tokens,
            kv_per_request=kv_per_request,
        )
        return cls(prefill, decode, handover)

    def need(self, rate: float, prompt: float, output: float) -> tuple[float, float]:
        """(prefill pods, decode pods) that take `rate` requests/s of this shape at the knee share."""
        prefill = rate * prompt / (KNEE_SHARE * self.prefill_throughput)
        decode = rate * output / self.decode.output_tokens / (KNEE_SHARE * self.decode.capacity)
        return prefill, decode
