/*-------------------------------------------------------------------------
 *
 * buffer.h
 *	  CpBuffer's functions (buffer.c); the struct is plain C (core/buffer.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_IO_BUFFER_H
#define CORGIPILE_IO_BUFFER_H

#include "postgres.h"

#include "utils/palloc.h"

#include "core/buffer.h"

extern void cp_buffer_init(CpBuffer *buf, MemoryContext cxt, bool sparse);
extern void cp_buffer_init_with_ids(CpBuffer *buf, MemoryContext cxt, bool sparse);
extern void cp_buffer_reset(CpBuffer *buf, int n_features);
extern void cp_buffer_reserve(CpBuffer *buf, int64 rows, int64 values);
extern void cp_buffer_set_budget(CpBuffer *buf, Size budget, const char *what,
								 const char *hint);
extern Size cp_buffer_bytes(const CpBuffer *buf, int64 rows, int64 values);
extern Size cp_buffer_used_bytes(const CpBuffer *buf);
extern void cp_buffer_densify(CpBuffer *dst, const CpBuffer *src);
extern void cp_buffer_reserve_borrowed(CpBuffer *buf, int64 rows);
extern void cp_buffer_free(CpBuffer *buf);
extern void cp_buffer_append_row(CpBuffer *dst, const CpBuffer *src, int64 row);

#endif							/* CORGIPILE_IO_BUFFER_H */
