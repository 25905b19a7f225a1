/* The elision channel's wire format: the one definition shared by
 * libcatcher (the client, inside mariadbd) and the storage node's server
 * (ppl/elision_server.h, embedded by the FSAL and by the test reference
 * server). Plain libc so that libcatcher can compile it into itself.
 *
 * A TCP stream of frames. Every frame is an 8-byte header followed by a body:
 *
 *   header: u8 type | u8 flags (0) | u16 body length | u32 request id
 *
 * All integers are big-endian, like every field of an InnoDB page.
 *
 *   HELLO        client -> server, first frame, request id 0
 *                u32 magic "PPLE" | u16 lowest version | u16 highest version
 *                | u16 token length | u16 0 | token bytes (<= 256)
 *   HELLO_REPLY  server -> client
 *                u32 magic | u16 chosen version | u16 status (enum
 *                ppl_elide_hello_status) | u32 max requests in flight
 *   ELIDE        client -> server, any number, without waiting (pipelined)
 *                u32 space id | u32 page no | u64 page LSN | u32 page
 *                checksum (last 4 bytes of the page) | u32 page size
 *   VERDICT      server -> client, one per ELIDE, carrying its request id;
 *                the server may answer in any order
 *                u8 verdict (0 = ACK, else enum ppl_elide_reason) | u8 0
 *                | u16 0 | u32 0 (reserved)
 *
 * ACK means: the storage node holds, durably, everything it needs to
 * reproduce exactly this page image (same LSN, same checksum), so the
 * client may drop the write. Anything else, including silence, a closed
 * connection or a malformed frame, means "write the page" (DESIGN I1).
 * A peer that receives a frame it does not understand closes the
 * connection; it never guesses. */
#ifndef PPL_ELISION_PROTO_H
#define PPL_ELISION_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PPL_ELIDE_MAGIC 0x50504c45u /* "PPLE" */
#define PPL_ELIDE_VERSION 1u        /* the only version so far */
#define PPL_ELIDE_HDR_LEN 8u
#define PPL_ELIDE_TOKEN_MAX 256u
#define PPL_ELIDE_HELLO_MIN (PPL_ELIDE_HDR_LEN + 12u)
#define PPL_ELIDE_HELLO_REPLY_LEN (PPL_ELIDE_HDR_LEN + 12u)
#define PPL_ELIDE_REQ_LEN (PPL_ELIDE_HDR_LEN + 24u)
#define PPL_ELIDE_VERDICT_LEN (PPL_ELIDE_HDR_LEN + 8u)
/* Longest frame either side may send. */
#define PPL_ELIDE_FRAME_MAX (PPL_ELIDE_HELLO_MIN + PPL_ELIDE_TOKEN_MAX)

enum ppl_elide_type {
	PPL_ELIDE_T_HELLO = 1,
	PPL_ELIDE_T_HELLO_REPLY = 2,
	PPL_ELIDE_T_ELIDE = 3,
	PPL_ELIDE_T_VERDICT = 4,
};

enum ppl_elide_hello_status {
	PPL_ELIDE_HELLO_OK = 0,
	PPL_ELIDE_HELLO_BAD_MAGIC = 1,
	PPL_ELIDE_HELLO_BAD_VERSION = 2, /* no common version */
	PPL_ELIDE_HELLO_BAD_TOKEN = 3,
	PPL_ELIDE_HELLO_BUSY = 4,        /* too many clients */
};

/* The verdict of one ELIDE request. 0 is the only "yes". Values a client
 * does not know are still a "no" (it counts them as NACK_OTHER). */
enum ppl_elide_reason {
	PPL_ELIDE_ACK = 0,
	PPL_ELIDE_NACK_UNKNOWN_FILE = 1,  /* space id not served here */
	PPL_ELIDE_NACK_UNKNOWN_PAGE = 2,  /* page not tracked (no base or records) */
	PPL_ELIDE_NACK_LSN_BEHIND = 3,    /* storage has the page only at an older LSN */
	PPL_ELIDE_NACK_LSN_AHEAD = 4,     /* storage has records beyond this LSN */
	PPL_ELIDE_NACK_CHECKSUM = 5,      /* rebuild at this LSN gives another checksum */
	PPL_ELIDE_NACK_NOT_DURABLE = 6,   /* the log up to the LSN is not durable/indexed yet */
	PPL_ELIDE_NACK_DISABLED = 7,      /* elision switched off on the storage node */
	PPL_ELIDE_NACK_BUSY = 8,          /* overloaded, try the write */
	PPL_ELIDE_NACK_PAGE_SIZE = 9,     /* page size differs from the tablespace's */
	PPL_ELIDE_NACK_UNSUPPORTED = 10,  /* compressed/encrypted/other format */
	PPL_ELIDE_NACK_INTERNAL = 11,     /* storage-side error */
	PPL_ELIDE_NACK_OTHER = 12,        /* anything else, also unknown codes */
	PPL_ELIDE_REASON_COUNT = 13
};

struct ppl_elide_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t body_len;
	uint32_t id;
};

struct ppl_elide_hello {
	uint16_t version_min, version_max;
	uint16_t token_len;
	char token[PPL_ELIDE_TOKEN_MAX];
};

struct ppl_elide_hello_reply {
	uint16_t version;
	uint16_t status;
	uint32_t max_inflight;
};

struct ppl_elide_req {
	uint32_t id;
	uint32_t space;
	uint32_t page_no;
	uint64_t lsn;
	uint32_t checksum;
	uint32_t page_size;
};

struct ppl_elide_verdict {
	uint32_t id;
	uint8_t reason; /* enum ppl_elide_reason */
};

/* Encoders write a whole frame into buf (which must hold the frame's
 * length) and return the number of bytes written. */
size_t ppl_elide_put_hello(uint8_t *buf, const char *token, size_t token_len);
size_t ppl_elide_put_hello_reply(uint8_t *buf, const struct ppl_elide_hello_reply *r);
size_t ppl_elide_put_req(uint8_t *buf, const struct ppl_elide_req *r);
size_t ppl_elide_put_verdict(uint8_t *buf, const struct ppl_elide_verdict *v);

/* Looks at the start of a received byte stream: returns the length of the
 * complete frame there (header + body) and fills *h, 0 if more bytes are
 * needed, -1 if the bytes cannot be a frame of this protocol (unknown type,
 * flags set, a body length that does not fit the type). */
long ppl_elide_frame(const uint8_t *buf, size_t len, struct ppl_elide_hdr *h);

/* Body decoders for a complete frame whose header ppl_elide_frame returned.
 * They return 0, or -1 when the body is malformed (wrong magic, token too
 * long, nonzero reserved bytes). */
int ppl_elide_get_hello(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_hello *out);
int ppl_elide_get_hello_reply(const uint8_t *frame, const struct ppl_elide_hdr *h,
			      struct ppl_elide_hello_reply *out);
int ppl_elide_get_req(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_req *out);
int ppl_elide_get_verdict(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_verdict *out);

/* "ack", "unknown_file", ... for logs and stats; "nack_code_N" style
 * names are never returned: codes beyond the table give "other". */
const char *ppl_elide_reason_name(unsigned reason);
const char *ppl_elide_hello_status_name(unsigned status);

#endif
