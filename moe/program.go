package moe

import (
	"fmt"
	"strings"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// Program is a MoE layer as ops over buffers, in execution order.
type Program struct {
	Layer   schedule.Layer // the layer it computes
	Buffers []*Buffer      // every buffer, each declared once
	Ops     []Op           // in execution order
}

// buffer declares a buffer of the program.
func (p *Program) buffer(name string, k Kind, d DType, doc string, shape ...launch.Expr) *Buffer {
	b := &Buffer{Name: name, Kind: k, DType: d, Shape: shape, Doc: doc}
	p.Buffers = append(p.Buffers, b)
	return b
}

func (p *Program) in(name string, d DType, doc string, shape ...launch.Expr) *Buffer {
	return p.buffer(name, Input, d, doc, shape...)
}

func (p *Program) scratch(name string, d DType, doc string, shape ...launch.Expr) *Buffer {
	return p.buffer(name, Scratch, d, doc, shape...)
}

// Buffer returns the buffer named name, or nil.
func (p *Program) Buffer(name string) *Buffer {
	for _, b := range p.Buffers {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Check verifies the program's structure: buffer names are unique and
// every buffer has a known dtype and a shape with at most one T-dependent
// dimension; op names are unique; every operand is a buffer of the
// program; inputs are never written; every scratch or output buffer is
// written before an op reads (or accumulates into) it, and every output is
// written. InOut buffers (caller-owned, accumulated into) hold values
// before the first op.
func (p *Program) Check() error {
	seen := map[string]*Buffer{}
	for _, b := range p.Buffers {
		if b.Name == "" || seen[b.Name] != nil {
			return fmt.Errorf("moe: buffer name %q empty or declared twice", b.Name)
		}
		seen[b.Name] = b
		if b.DType.Size() == 0 {
			return fmt.Errorf("moe: buffer %s has unknown dtype %q", b.Name, b.DType)
		}
		nt := 0
		for _, d := range b.Shape {
			if d.A != 0 {
				nt++
			}
		}
		if len(b.Shape) == 0 || nt > 1 {
			return fmt.Errorf("moe: buffer %s: shape %v needs 1+ dimensions, at most one depending on T", b.Name, b.Shape)
		}
	}
	written := map[*Buffer]bool{}
	ops := map[string]bool{}
	for _, op := range p.Ops {
		if ops[op.Name()] {
			return fmt.Errorf("moe: op %s appears twice", op.Name())
		}
		ops[op.Name()] = true
		for _, o := range op.Operands() {
			if seen[o.Buffer.Name] != o.Buffer {
				return fmt.Errorf("moe: op %s: operand %s names buffer %s that the program does not declare", op.Name(), o.Role, o.Buffer.Name)
			}
			switch {
			case o.Writes() && o.Buffer.Kind == Input:
				return fmt.Errorf("moe: op %s writes input %s", op.Name(), o.Buffer.Name)
			case o.Reads() && o.Buffer.Kind != Input && o.Buffer.Kind != InOut && !written[o.Buffer]:
				return fmt.Errorf("moe: op %s reads %s %s before any op writes it", op.Name(), o.Buffer.Kind, o.Buffer.Name)
			}
		}
		for _, o := range op.Operands() {
			if o.Writes() {
				written[o.Buffer] = true
			}
		}
	}
	for _, b := range p.Buffers {
		if (b.Kind == Output || b.Kind == Scratch) && !written[b] {
			return fmt.Errorf("moe: %s buffer %s is never written", b.Kind, b.Name)
		}
	}
	return nil
}

// String lists the buffers and the ops, one per line:
//
//	input x bf16[1*T+0,7168]
//	...
//	count(ids:ids, counts+=counts, row_of_slot=row_of_slot, err+=err)
func (p *Program) String() string {
	var sb strings.Builder
	for _, b := range p.Buffers {
		fmt.Fprintf(&sb, "%-7s %s\n", b.Kind, b)
	}
	for _, op := range p.Ops {
		var os []string
		for _, o := range op.Operands() {
			os = append(os, o.String())
		}
		fmt.Fprintf(&sb, "%s(%s)\n", op.Name(), strings.Join(os, ", "))
	}
	return sb.String()
}
