package storetest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

var timeType = reflect.TypeFor[time.Time]()

// diff reports how got differs from want, one line per field, element or
// key that differs, or "" when they are equal. It compares as
// reflect.DeepEqual does (a nil slice or map differs from an empty one),
// except that times are compared with time.Time.Equal: a time read back
// from a store carries no monotonic reading and may carry another
// location, and neither is part of the value.
func diff(want, got any) string {
	var lines []string
	walk(&lines, "", reflect.ValueOf(want), reflect.ValueOf(got))
	return strings.Join(lines, "\n")
}

func walk(lines *[]string, path string, w, g reflect.Value) {
	report := func(format string, args ...any) {
		p := path
		if p == "" {
			p = "value"
		}
		*lines = append(*lines, p+": "+fmt.Sprintf(format, args...))
	}
	if !w.IsValid() || !g.IsValid() {
		if w.IsValid() != g.IsValid() {
			report("want %s, got %s", show(w), show(g))
		}
		return
	}
	if w.Type() != g.Type() {
		report("want %s (%s), got %s (%s)", show(w), w.Type(), show(g), g.Type())
		return
	}
	if w.Type() == timeType {
		if wt, gt := w.Interface().(time.Time), g.Interface().(time.Time); !wt.Equal(gt) {
			report("want %v, got %v", wt, gt)
		}
		return
	}
	switch w.Kind() {
	case reflect.Struct:
		for i := range w.NumField() {
			walk(lines, path+"."+w.Type().Field(i).Name, w.Field(i), g.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if w.Kind() == reflect.Slice && w.IsNil() != g.IsNil() {
			report("want %s, got %s", show(w), show(g))
			return
		}
		for i := range max(w.Len(), g.Len()) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= g.Len():
				*lines = append(*lines, p+": missing "+show(w.Index(i)))
			case i >= w.Len():
				*lines = append(*lines, p+": unexpected "+show(g.Index(i)))
			default:
				walk(lines, p, w.Index(i), g.Index(i))
			}
		}
	case reflect.Map:
		if w.IsNil() != g.IsNil() {
			report("want %s, got %s", show(w), show(g))
			return
		}
		keys := map[string]reflect.Value{}
		for _, k := range append(w.MapKeys(), g.MapKeys()...) {
			keys[fmt.Sprint(k.Interface())] = k
		}
		for _, name := range slices.Sorted(maps.Keys(keys)) {
			k := keys[name]
			p := fmt.Sprintf("%s[%v]", path, name)
			wv, gv := w.MapIndex(k), g.MapIndex(k)
			switch {
			case !gv.IsValid():
				*lines = append(*lines, p+": missing "+show(wv))
			case !wv.IsValid():
				*lines = append(*lines, p+": unexpected "+show(gv))
			default:
				walk(lines, p, wv, gv)
			}
		}
	case reflect.Pointer, reflect.Interface:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				report("want %s, got %s", show(w), show(g))
			}
			return
		}
		walk(lines, path, w.Elem(), g.Elem())
	default:
		if !reflect.DeepEqual(w.Interface(), g.Interface()) {
			report("want %s, got %s", show(w), show(g))
		}
	}
}

// show prints v for a diff line: strings quoted, so that "" shows, and
// nil apart from empty.
func show(v reflect.Value) string {
	if !v.IsValid() {
		return "<none>"
	}
	if k := v.Kind(); (k == reflect.Slice || k == reflect.Map || k == reflect.Pointer) && v.IsNil() {
		return "nil"
	}
	if v.Kind() == reflect.String {
		return fmt.Sprintf("%q", v.String())
	}
	return fmt.Sprintf("%+v", v.Interface())
}
