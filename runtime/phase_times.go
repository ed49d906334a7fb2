package runtime

import (
	"fmt"
	"math"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
)

// PhaseTime is one kernel's place on the device's timeline in the runs
// since the last ResetPhaseTimes of an instrumented layer
// (schedule.Schedule.PhaseTimes): the start of its first block (after its
// wait for the previous kernel) and the end of its last warp, in
// %globaltimer nanoseconds (launch.BufPhaseTimes).
type PhaseTime struct {
	Kernel     string // the kernel's name
	Start, End uint64 // ns on the device's global timer
}

// phaseBuffer returns the device address and bytes of ly's phase_times
// buffer: an error when the layer is not instrumented or no Forward has
// laid out its workspace yet.
func (ly *Layer) phaseBuffer() (driver.DevicePtr, int, error) {
	i, ok := ly.plan.bufIndex[launch.BufPhaseTimes]
	if !ok || !ly.sched.PhaseTimes {
		return 0, 0, fmt.Errorf("mokc runtime: layer %s: not instrumented (schedule.Schedule.PhaseTimes)", ly.layer.Name)
	}
	if ly.wsOff == nil || ly.wsOff[i] < 0 {
		return 0, 0, fmt.Errorf("mokc runtime: layer %s: phase times: no workspace yet (run a Forward first)", ly.layer.Name)
	}
	return ly.ws.Offset(ly.wsOff[i]), 16 * launch.PhaseSlots * len(ly.plan.Kernels), nil
}

// ResetPhaseTimes queues on stream the reset of the layer's phase-time
// records (starts all ones, ends zero), so that PhaseTimes reports the
// runs queued after it. Errors: the layer is not instrumented, or no
// Forward has run yet (the records live in its workspace).
func (ly *Layer) ResetPhaseTimes(stream *driver.Stream) error {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	ptr, n, err := ly.phaseBuffer()
	if err != nil {
		return err
	}
	init := make([]uint64, n/8)
	for k := range ly.plan.Kernels {
		for s := range launch.PhaseSlots {
			init[2*launch.PhaseSlots*k+s] = math.MaxUint64
		}
	}
	return ly.ctx.CopyToDeviceAsync(ptr, init, stream)
}

// PhaseTimes waits for stream and returns, in launch order, the kernels
// that ran since the last ResetPhaseTimes with their first start and last
// end. Errors: as ResetPhaseTimes, and the stream's.
func (ly *Layer) PhaseTimes(stream *driver.Stream) ([]PhaseTime, error) {
	if err := stream.Synchronize(); err != nil {
		return nil, err
	}
	ly.mu.Lock()
	defer ly.mu.Unlock()
	ptr, n, err := ly.phaseBuffer()
	if err != nil {
		return nil, err
	}
	words := make([]uint64, n/8)
	if err := ly.ctx.CopyFromDevice(words, ptr); err != nil {
		return nil, err
	}
	var out []PhaseTime
	for k, kern := range ly.plan.Kernels {
		t := PhaseTime{Kernel: kern.Name, Start: math.MaxUint64}
		for s := range launch.PhaseSlots {
			t.Start = min(t.Start, words[2*launch.PhaseSlots*k+s])
			t.End = max(t.End, words[2*launch.PhaseSlots*k+launch.PhaseSlots+s])
		}
		if t.Start != math.MaxUint64 && t.End >= t.Start {
			out = append(out, t)
		}
	}
	return out, nil
}
