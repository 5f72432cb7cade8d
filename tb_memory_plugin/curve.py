"""The memory curve of one memory space: build, peak, value at a time, windows, downsampling.

The curve is the running total of the allocation events sorted by time
(docs/figures.md, "The curve"); bytes are relative to the step's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace import SpaceTrace


@dataclass
class Curve:
    """The step function of bytes over time (relative to the step's start)."""

    time_us: np.ndarray  # distinct event times, sorted
    rise_bytes: np.ndarray  # bytes over the start after all events at that time
    group_end: np.ndarray  # index (in sorted events) of the last event at each time
    event_order: np.ndarray  # argsort of events by time (stable)
    peak_index: int  # into time_us; -1 when the curve never rises
    peak_time_us: int
    peak_rise_bytes: int

    def events_up_to_peak(self) -> np.ndarray:
        """Indices of events at or before the peak time (in time order)."""
        if self.peak_index < 0:
            return np.zeros(0, dtype=np.int64)
        return self.event_order[: self.group_end[self.peak_index] + 1]

    def events_after_peak(self) -> np.ndarray:
        if self.peak_index < 0:
            return self.event_order
        return self.event_order[self.group_end[self.peak_index] + 1:]

    def last_event(self, positions: np.ndarray) -> np.ndarray:
        """The last event (an index into the space's events) of each given time position."""
        return self.event_order[self.group_end[positions]] if positions.size else positions

    @property
    def end_rise_bytes(self) -> int:
        return int(self.rise_bytes[-1]) if self.rise_bytes.size else 0


def build_curve(space: SpaceTrace) -> Curve:
    """Running total of allocation events; the peak is its maximum."""
    order = np.argsort(space.event_time_us, kind="stable")
    times = space.event_time_us[order]
    running = np.cumsum(space.event_bytes[order])
    if times.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Curve(empty, empty, empty, order, -1, 0, 0)
    last_of_group = np.flatnonzero(np.diff(times)) if times.size > 1 else np.zeros(0, dtype=np.int64)
    group_end = np.append(last_of_group, times.size - 1)
    time_us = times[group_end]
    rise = running[group_end]
    peak_index = int(np.argmax(rise))
    if rise[peak_index] <= 0:
        return Curve(time_us, rise, group_end, order, -1, 0, 0)
    return Curve(time_us, rise, group_end, order, peak_index, int(time_us[peak_index]), int(rise[peak_index]))


@dataclass
class SampledCurve:
    """At most N buckets of a step function, keeping each bucket's min and max."""

    time_us: np.ndarray  # time at which each bucket reaches its max
    min_bytes: np.ndarray
    max_bytes: np.ndarray
    position: np.ndarray  # index into the input points of each bucket's max


def downsample(time_us: np.ndarray, values: np.ndarray, points: int, start_value: int = 0) -> SampledCurve:
    """Min/max per time bucket; the global maximum is always one of the points.

    `values[i]` holds from `time_us[i]` until the next time; before the first
    time the function is `start_value` (it counts towards the first bucket's min).
    """
    n = time_us.size
    if n <= points:
        index = np.arange(n)
        return SampledCurve(time_us.copy(), values.copy(), values.copy(), index)
    span = int(time_us[-1] - time_us[0]) + 1
    bucket = ((time_us - time_us[0]) * points) // span
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    maxima = np.maximum.reduceat(values, starts)
    minima = np.minimum.reduceat(values, starts)
    # The value carried into a bucket from the one before is part of its range.
    carried = np.r_[start_value, values[starts[1:] - 1]]
    minima = np.minimum(minima, carried)
    bucket_of_point = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
    is_max = values == maxima[bucket_of_point]
    first_max = np.flatnonzero(is_max)
    _, first_in_bucket = np.unique(bucket_of_point[first_max], return_index=True)
    position = first_max[first_in_bucket]
    return SampledCurve(time_us[position], minima, maxima, position)


def sample_window(curve: Curve, points: int, window: tuple[int, int] | None = None) -> SampledCurve:
    """The curve downsampled to `points` buckets, over the whole step or a window.

    A window (start_us, end_us) is bucketed on its own, so a zoomed view gets
    `points` buckets of its own. When it opens between events, its first point
    is the value carried in at start_us. Positions index `curve.time_us`.
    """
    first, last = 0, curve.time_us.size
    if window is not None:
        first = int(np.searchsorted(curve.time_us, window[0], side="left"))
        last = int(np.searchsorted(curve.time_us, window[1], side="right"))
    carried_in = int(curve.rise_bytes[first - 1]) if first > 0 else 0
    sampled = downsample(curve.time_us[first:last], curve.rise_bytes[first:last], points, carried_in)
    sampled.position += first
    opens_between_events = window is not None and 0 < first and (
        first == curve.time_us.size or int(curve.time_us[first]) > window[0])
    if opens_between_events:
        sampled = SampledCurve(np.r_[window[0], sampled.time_us], np.r_[carried_in, sampled.min_bytes],
                               np.r_[carried_in, sampled.max_bytes], np.r_[first - 1, sampled.position])
    return sampled


def sample_snapshots(space: SpaceTrace, points: int, window: tuple[int, int] | None = None
                     ) -> tuple[SampledCurve, np.ndarray]:
    """The allocator's own bytes-in-use readings, downsampled (within the window, if any),
    and the index of each point into the space's snapshots (to read other series there)."""
    by_time = np.argsort(space.snapshot_time_us, kind="stable")
    if window is not None:
        times = space.snapshot_time_us[by_time]
        by_time = by_time[(times >= window[0]) & (times <= window[1])]
    sampled = downsample(space.snapshot_time_us[by_time], space.snapshot_bytes[by_time], points)
    return sampled, by_time[sampled.position]


def held_by(space: SpaceTrace, curve: Curve, execs: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """What a set of executions holds (relative bytes) after each given time position."""
    if positions.size == 0:
        return np.zeros(0, dtype=np.int64)
    member = np.zeros(space.exec_count, dtype=bool)
    member[execs] = True
    ordered = curve.event_order
    contributions = np.where(member[space.event_exec[ordered]], space.event_bytes[ordered], 0)
    return np.cumsum(contributions)[curve.group_end[positions]]
