package codegen

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// timingSchedule is the sm_80 default schedule of l with "stages,warps,bk"
// applied (for timing experiments).
func timingSchedule(l schedule.Layer, v string) (schedule.Schedule, error) {
	s, err := schedule.DefaultSchedule(l, target.SM80)
	if err != nil {
		return s, err
	}
	var st, w, bk int
	if _, err := fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%d %d %d", &st, &w, &bk); err != nil {
		return s, fmt.Errorf("MOKC_TIMING_SCHED=%q: want stages,warps,bk: %v", v, err)
	}
	s.Stages, s.Warps.MMA, s.FC1.K, s.FC2.K = st, w, bk, bk
	return s, s.Validate(l)
}

// TestTimingPTX writes llc-19 PTX of schedule variants of qwen3-30b-a3b
// for TestForwardTimingSM80 when MOKC_TIMING_OUT names a directory.
func TestTimingPTX(t *testing.T) {
	dir := os.Getenv("MOKC_TIMING_OUT")
	if dir == "" {
		t.Skip("MOKC_TIMING_OUT not set")
	}
	l := forwardCases(t)[0].layer
	for _, v := range strings.Fields(os.Getenv("MOKC_TIMING_VARIANTS")) {
		s, err := timingSchedule(l, v)
		if err != nil {
			t.Fatal(err)
		}
		_, text := buildText(t, l, s)
		if err := os.WriteFile(dir+"/"+strings.ReplaceAll(v, ",", "_")+".ptx", []byte(llcPTX(t, text, "sm_80")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
