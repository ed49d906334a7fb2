package target

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	for _, tg := range All() {
		for _, s := range []string{tg.String(), strings.ToUpper(tg.String()), strings.TrimPrefix(tg.String(), "sm_")} {
			got, err := Parse(s)
			if err != nil || got != tg {
				t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, tg)
			}
		}
		b, err := json.Marshal(tg)
		if err != nil {
			t.Fatal(err)
		}
		var back Target
		if err := json.Unmarshal(b, &back); err != nil || back != tg {
			t.Errorf("JSON %s -> %v, %v", b, back, err)
		}
	}
	if _, err := Parse("sm_75"); err == nil || !strings.Contains(err.Error(), "sm_80, sm_90a or sm_100a") {
		t.Errorf("Parse(sm_75) error %v does not name the targets", err)
	}
}

func TestRunsOn(t *testing.T) {
	cases := []struct {
		t  Target
		cc int
		ok bool
	}{
		{SM80, 80, true}, {SM80, 90, true}, {SM80, 75, false},
		{SM90a, 90, true}, {SM90a, 100, false}, {SM90a, 80, false},
		{SM100a, 100, true}, {SM100a, 90, false},
	}
	for _, c := range cases {
		err := c.t.RunsOn(c.cc)
		if (err == nil) != c.ok {
			t.Errorf("%v.RunsOn(%d) = %v, want ok=%v", c.t, c.cc, err, c.ok)
		}
	}
	if err := SM90a.RunsOn(100); err == nil || !strings.Contains(err.Error(), "use --target sm_80 or sm_100a") {
		t.Errorf("hint missing: %v", err)
	}
}

func TestTable(t *testing.T) {
	if SM90a.SMs() != 132 || SM90a.SharedMemoryLimit() != 227*1024 || SM80.SharedMemoryLimit() != 163*1024 {
		t.Errorf("table: %+v %+v", SM90a.Info(), SM80.Info())
	}
	if SM90a.SharedMemoryFor(1) != 227*1024 || SM90a.SharedMemoryFor(2) != 113*1024 || SM80.SharedMemoryFor(2) != 81*1024 {
		t.Errorf("shared memory for 1 and 2 CTAs per SM: %d %d, sm_80 %d", SM90a.SharedMemoryFor(1), SM90a.SharedMemoryFor(2), SM80.SharedMemoryFor(2))
	}
	if !SM90a.Has(WGMMA) || SM100a.Has(WGMMA) || !SM100a.Has(TCGen05) || SM80.Has(FP8MMA) {
		t.Error("feature table")
	}
	if SM100a.PTXVersion() != "8.8" || SM80.PTXVersion() != "8.0" || SM100a.TMEMColumns() != 512 || SM90a.TMEMColumns() != 0 {
		t.Error("versions or TMEM")
	}
	if Names() != "sm_80, sm_90a or sm_100a" {
		t.Errorf("Names() = %q", Names())
	}
}

func TestMemoryBytes(t *testing.T) {
	for _, tg := range All() {
		if m := tg.Info().MemoryBytes; m < 40<<30 || m > 1<<40 {
			t.Errorf("%v: MemoryBytes = %d", tg, m)
		}
	}
	if got := MaxMemoryBytes(); got != 192e9 || got != SM100a.Info().MemoryBytes {
		t.Errorf("MaxMemoryBytes = %d, want B200's 192 GB", got)
	}
}
