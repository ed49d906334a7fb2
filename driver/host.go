package driver

import (
	"fmt"
	"reflect"
	"unsafe"
)

// hostBytes returns the backing store of a host slice for a copy: its first
// element's address and its length in bytes. It accepts slices whose element
// type has a fixed-size numeric kind ([]byte, []int8, []uint16, []int16,
// []uint32, []int32, []uint64, []int64, []float32, []float64, and named types
// over them such as a `type BF16 uint16`), because their memory holds no Go
// pointers and may be handed to the driver (cgo pointer rules). A nil or empty
// slice gives 0 bytes.
func hostBytes(v any) (unsafe.Pointer, int, error) {
	if v == nil {
		return nil, 0, fmt.Errorf("mokc driver: host buffer is nil; want a slice of a numeric type")
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil, 0, fmt.Errorf("mokc driver: host buffer has type %T; want a slice of a numeric type", v)
	}
	et := rv.Type().Elem()
	switch et.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
	default:
		return nil, 0, fmt.Errorf("mokc driver: host buffer has type %T; want a slice of a fixed-size numeric type", v)
	}
	n := rv.Len() * int(et.Size())
	if n == 0 {
		return nil, 0, nil
	}
	return rv.UnsafePointer(), n, nil
}
