// The identity shown in the summary header: at-peak bytes by category and by
// op type each add up to the peak's rise over the start of the step.

import type { Bytes, DeviceSummary } from '../api';

export interface PeakIdentity {
  categoriesBytes: number;
  opTypesBytes: number;
  figureBytes: number;
  peakRiseBytes: number;
  holds: boolean;
}

/** `peakRiseBytes`: the device's peak rise (non-null: a device with a curve). */
export function peakIdentity(device: DeviceSummary, peakRiseBytes: Bytes): PeakIdentity {
  const categoriesBytes = device.categories.reduce((s, c) => s + c.at_peak_bytes, 0);
  const opTypesBytes = device.op_types.reduce((s, o) => s + o.figures.at_peak_bytes, 0);
  const figureBytes = device.figures.at_peak_bytes;
  return {
    categoriesBytes,
    opTypesBytes,
    figureBytes,
    peakRiseBytes,
    holds: categoriesBytes === peakRiseBytes && opTypesBytes === peakRiseBytes && figureBytes === peakRiseBytes,
  };
}
