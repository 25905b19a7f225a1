/* Two orderings liburcu gives its users, told to ThreadSanitizer where
 * they happen. Debian's liburcu is not built with TSan, so TSan sees
 * neither, and without them every object read under RCU looks raced:
 *
 *   publication  an object's fields are written before it is added to an
 *                RCU hash table (cds_lfht_add*, a release inside liburcu);
 *                a reader that finds it sees them. PPL_TSAN_PUBLISH(obj)
 *                before the add, PPL_TSAN_FOUND(obj) after the lookup.
 *   grace        a call_rcu() callback runs only after every reader that
 *                could see the object left its read-side section, so it
 *                may free or recycle the object. PPL_TSAN_READ_DONE(dom)
 *                before rcu_read_unlock(), PPL_TSAN_GRACE(dom) at the top
 *                of the callback (dom: one address per RCU-protected
 *                structure).
 *
 * The annotations claim no more than liburcu guarantees (the grace one a
 * little more: every read-side section, not only those that began before
 * call_rcu, is ordered before the callback; a reader that began later
 * cannot find the object). Compiled to nothing outside a TSan build. */
#ifndef PPL_RCU_TSAN_H
#define PPL_RCU_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define PPL_RCU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PPL_RCU_TSAN 1
#endif
#endif

#ifdef PPL_RCU_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PPL_TSAN_PUBLISH(obj) __tsan_release((void *)(obj))
#define PPL_TSAN_FOUND(obj) __tsan_acquire((void *)(obj))
#define PPL_TSAN_READ_DONE(dom) __tsan_release((void *)(dom))
#define PPL_TSAN_GRACE(dom) __tsan_acquire((void *)(dom))
#else
#define PPL_TSAN_PUBLISH(obj) ((void)(obj))
#define PPL_TSAN_FOUND(obj) ((void)(obj))
#define PPL_TSAN_READ_DONE(dom) ((void)(dom))
#define PPL_TSAN_GRACE(dom) ((void)(dom))
#endif

#endif
