package driver

import (
	"strings"
	"testing"
	"unsafe"
)

type bf16 uint16 // a named element type, as layouts may define

func TestHostBytes(t *testing.T) {
	f := []float32{1, 2, 3}
	cases := []struct {
		v     any
		bytes int
		first unsafe.Pointer
	}{
		{[]byte{1, 2, 3}, 3, nil},
		{[]int8{1}, 1, nil},
		{[]uint16{1, 2}, 4, nil},
		{[]bf16{1, 2, 3}, 6, nil},
		{[]int32{1, 2, 3}, 12, nil},
		{[]uint32{1}, 4, nil},
		{f, 12, unsafe.Pointer(&f[0])},
		{f[1:], 8, unsafe.Pointer(&f[1])},
		{[]float64{1, 2}, 16, nil},
		{[]uint64{1, 2}, 16, nil},
		{[]int64{1}, 8, nil},
		{[]float32{}, 0, nil},
		{[]uint8(nil), 0, nil},
	}
	for _, c := range cases {
		p, n, err := hostBytes(c.v)
		if err != nil {
			t.Errorf("%T: %v", c.v, err)
			continue
		}
		if n != c.bytes {
			t.Errorf("%T: %d bytes, want %d", c.v, n, c.bytes)
		}
		if c.first != nil && p != c.first {
			t.Errorf("%T: pointer %p, want the first element %p", c.v, p, c.first)
		}
	}
	for _, v := range []any{nil, 7, "abc", []string{"a"}, []*int{nil}, []bool{true}, [4]byte{}, []struct{ A int }{{1}}, []any{1}} {
		if _, _, err := hostBytes(v); err == nil || !strings.Contains(err.Error(), "host buffer") {
			t.Errorf("%T: want a host buffer error, got %v", v, err)
		}
	}
}
