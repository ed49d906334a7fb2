package layouts

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/target"
)

func TestDescribe(t *testing.T) {
	tl, _ := NewSmemTile(target.SM90a, OperandA, DTypeBF16, 64, 64)
	s, err := tl.Describe(0x400, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Sw<3,3,3> o ((8,8),(64,1)):((64,512),(1,4096))",
		"k-step  1: 0x4000004000010042  start=0x420 LBO=16 SBO=1024 base=0 swizzle=128B",
		"row 3: 3 2 1 0 7 6 5 4",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("sm_90a description lacks %q:\n%s", want, s)
		}
	}
	if _, err := tl.Describe(0x100, 0); err == nil {
		t.Error("misaligned base accepted")
	}
	tl, _ = NewSmemTile(target.SM100a, OperandA, DTypeBF16, 128, 64)
	s, err = tl.Describe(0, 256)
	if err != nil || !strings.Contains(s, "0x08400490  kind::f16 M=128 N=256 A=bf16 B=bf16 D=f32 K-major") ||
		!strings.Contains(s, "0x4000404000000000") {
		t.Errorf("sm_100a description (%v):\n%s", err, s)
	}
	if _, err := tl.Describe(0, 12); err == nil {
		t.Error("N = 12 accepted")
	}
	tl, _ = NewSmemTile(target.SM80, OperandA, DTypeBF16, 64, 32)
	if s, _ = tl.Describe(0, 0); !strings.Contains(s, "lanes 16-23:    16    80   128   192") {
		t.Errorf("sm_80 description:\n%s", s)
	}
	l, _ := NewSFLayout([]int{129, 0}, 2880)
	s, err = l.Describe(0x2000)
	if err != nil || !strings.Contains(s, "((32,4,2),(4,23)):((16,4,11776),(1,512))") || !strings.Contains(s, "0x0000400800000200") ||
		!strings.Contains(s, "expert 1: 0 rows") {
		t.Errorf("scale-factor description (%v):\n%s", err, s)
	}
	if _, err := l.Describe(0x2008); err == nil {
		t.Error("misaligned scale tile accepted")
	}
}
