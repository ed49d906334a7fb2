package runtime

import (
	"fmt"
	"math"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
)

// PhaseTime is one kernel's place on the device's timeline in the runs
// since the last ResetPhaseTimes of an instrumented layer
// (schedule.Schedule.PhaseTimes): the start of its first block (thread 0,
// after its wait for the previous kernel) and the latest return of a
// warp's lane 0, in %globaltimer nanoseconds (launch.BufPhaseTimes); or an
// inner phase's of a kernel (launch.Kernel.Phases: Kernel is the phase's
// name, "<kernel>/<part>"), from the first warp entering it to the last
// leaving it. The
// timer's resolution is the device's (about 1 µs on some parts, finer on
// the H200 measured here), which bounds what a kernel of a few µs shows.
type PhaseTime struct {
	Kernel     string // the kernel's name
	Start, End uint64 // ns on the device's global timer
}

// phaseBuffer returns the device address and bytes of ly's phase_times
// buffer: an error when the layer is not instrumented or no Forward (a
// backward's Layer: no Backward) has laid out its workspace yet (grow
// resets the records of every new workspace).
func (ly *Layer) phaseBuffer() (driver.DevicePtr, int, error) {
	i, ok := ly.plan.bufIndex[launch.BufPhaseTimes]
	if !ok {
		return 0, 0, fmt.Errorf("mokc runtime: layer %s: not instrumented (schedule.Schedule.PhaseTimes)", ly.layer.Name)
	}
	if ly.wsOff == nil || ly.wsOff[i] < 0 {
		run := "Forward"
		if ly.isBackward {
			run = "Backward"
		}
		return 0, 0, fmt.Errorf("mokc runtime: layer %s: phase times: no workspace yet (run a %s first)", ly.layer.Name, run)
	}
	return ly.ws.Offset(ly.wsOff[i]), 16 * launch.PhaseSlots * ly.phaseRecords(), nil
}

// phaseRecords is the records of the phase_times buffer: one per kernel,
// then one per inner phase (launch.BufPhaseTimes).
func (ly *Layer) phaseRecords() int {
	n := len(ly.plan.Kernels)
	for _, k := range ly.plan.Kernels {
		n += len(k.Phases)
	}
	return n
}

// ResetPhaseTimes queues on stream (nil: the legacy default stream) the
// reset of the layer's phase-time records (starts all ones, ends zero), so
// that PhaseTimes reports the runs queued after it. Errors: the layer is
// not instrumented, or no Forward has laid out the workspace yet (the
// records live in it; a new workspace starts with them reset).
func (ly *Layer) ResetPhaseTimes(stream *driver.Stream) error {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	ptr, n, err := ly.phaseBuffer()
	if err != nil {
		return err
	}
	return ly.ctx.CopyToDeviceAsync(ptr, ly.phaseResetImage(n), stream)
}

// phaseWord is the index in the phase_times buffer of record k's (kernel
// k's, or past the kernels an inner phase's) slot s of its start records,
// or of its end records when end is set (launch.BufPhaseTimes).
func phaseWord(k, s int, end bool) int {
	w := 2*launch.PhaseSlots*k + s
	if end {
		w += launch.PhaseSlots
	}
	return w
}

// phaseResetImage is the reset value of the n-byte phase_times buffer:
// every record's start words all ones, its end words zero.
func (ly *Layer) phaseResetImage(n int) []uint64 {
	img := make([]uint64, n/8)
	for k := range ly.phaseRecords() {
		for s := range launch.PhaseSlots {
			img[phaseWord(k, s, false)] = math.MaxUint64
		}
	}
	return img
}

// PhaseTimes waits for stream (nil: the whole context, as for the legacy
// default stream) and returns, in launch order, the kernels that ran since
// the last ResetPhaseTimes (or since the workspace was laid out) with
// their first start and last end. Errors: as ResetPhaseTimes, and the
// stream's.
func (ly *Layer) PhaseTimes(stream *driver.Stream) ([]PhaseTime, error) {
	sync := ly.ctx.Synchronize
	if stream != nil {
		sync = stream.Synchronize
	}
	if err := sync(); err != nil {
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
	record := func(r int, name string) {
		t := PhaseTime{Kernel: name, Start: math.MaxUint64}
		for s := range launch.PhaseSlots {
			t.Start = min(t.Start, words[phaseWord(r, s, false)])
			t.End = max(t.End, words[phaseWord(r, s, true)])
		}
		if t.Start != math.MaxUint64 && t.End >= t.Start {
			out = append(out, t)
		}
	}
	inner := len(ly.plan.Kernels)
	for k, kern := range ly.plan.Kernels {
		record(k, kern.Name)
		for _, ph := range kern.Phases { // after their kernel
			record(inner, ph)
			inner++
		}
	}
	return out, nil
}

// ResetBackwardPhaseTimes is ResetPhaseTimes for the backward's kernels
// (the backward program's Layer, instrumented when the layer's schedule
// is; compiled and loaded when Backward has not run yet). Errors: as
// ResetPhaseTimes, and no Backward has laid out the backward's workspace
// yet.
func (ly *Layer) ResetBackwardPhaseTimes(stream *driver.Stream) error {
	bwd, err := ly.backward()
	if err != nil {
		return err
	}
	return bwd.ResetPhaseTimes(stream)
}

// BackwardPhaseTimes is PhaseTimes for the backward's kernels: those that
// ran in the Backwards since the last ResetBackwardPhaseTimes, in launch
// order. Errors: as ResetBackwardPhaseTimes.
func (ly *Layer) BackwardPhaseTimes(stream *driver.Stream) ([]PhaseTime, error) {
	bwd, err := ly.backward()
	if err != nil {
		return nil, err
	}
	return bwd.PhaseTimes(stream)
}
