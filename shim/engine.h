/* The replay engine: records deferrable operations (record.h: launches, memsets, copies, event records
 * and waits), follows the learned pattern (pattern.h), defers the operations of a chunk that matches a
 * learned variant, and at the chunk's end launches the variant's CUDA graph (graph.h) with the changed
 * arguments patched in; anything unexpected issues the deferred operations eagerly, in order.
 * Locking: one engine per CUDA context (up to AG_MAX_ENGINES), each with its own mutex; the critical
 * section holds the signature match and the copy of the operation's arguments. No path holds two engine
 * mutexes: calls that concern several contexts visit the engines one at a time. Declarations
 * for the other files are in internal.h (group engine.c). */
#ifndef AG_ENGINE_H
#define AG_ENGINE_H
#include "internal.h"
#endif
