package outbox

import "github.com/jackc/pgx/v5/pgtype"

// Array parameters of the hot path's statements (claim and settle take one
// array per column), encoded by pgx without an allocation per element.
//
// pgx encodes a []int64, []string or []pgtype.Timestamptz parameter through
// pgtype.ArrayGetter, whose Index returns each element as an `any`: boxing
// an int64 past 255, a string or a struct allocates, so a settle of 256
// rows made ~2,300 small allocations only to write its parameters (issue 29).
// These types hand out a pointer to the element instead (boxing a pointer
// allocates nothing), of a type pgx encodes through its Int64Valuer,
// TextValuer or TimestamptzValuer plan; the bytes on the wire are the same.
//
// pgx finds that plan through the parameter's type, so these types work
// only where Postgres has told pgx the types (the exec modes that describe
// a statement first): the hot pools' prepared statements (store.go,
// QueryExecModeCacheStatement), which are where claim and settle run. In
// the exec or simple protocol modes pgx cannot encode them at all; that is
// why sdk/txoutbox, which runs on an application's connection in whatever
// mode it uses, keeps plain slices.

// int8Array is a bigint[] parameter.
type int8Array []int64

type int8Elem int64

func (v *int8Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*v), Valid: true}, nil
}

func (a int8Array) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }
func (a int8Array) Index(i int) any                     { return (*int8Elem)(&a[i]) }
func (a int8Array) IndexType() any                      { return (*int8Elem)(nil) }

// int4Array is an int[] parameter.
type int4Array []int32

type int4Elem int32

func (v *int4Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*v), Valid: true}, nil
}

func (a int4Array) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }
func (a int4Array) Index(i int) any                     { return (*int4Elem)(&a[i]) }
func (a int4Array) IndexType() any                      { return (*int4Elem)(nil) }

// textArray is a text[] parameter; an element is never NULL ("" is ”).
type textArray []string

type textElem string

func (v *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*v), Valid: true}, nil
}

func (a textArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }
func (a textArray) Index(i int) any                     { return (*textElem)(&a[i]) }
func (a textArray) IndexType() any                      { return (*textElem)(nil) }

// timestamptzArray is a timestamptz[] parameter; an invalid element is NULL.
type timestamptzArray []pgtype.Timestamptz

func (a timestamptzArray) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }
func (a timestamptzArray) Index(i int) any                     { return &a[i] }
func (a timestamptzArray) IndexType() any                      { return (*pgtype.Timestamptz)(nil) }

// dimensions is pgtype.FlatArray's: nil for a nil slice (NULL), else one
// dimension of n elements from 1.
func dimensions(isNil bool, n int) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}
