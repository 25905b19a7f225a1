/* Encoding and strict decoding of elision channel frames. Strict because
 * both ends treat anything unexpected as "close the connection and write
 * the page", which is only safe if nothing unexpected is ever accepted. */
#include "ppl/elision_proto.h"

#include <string.h>

#include "ppl/mach.h"

static void put_hdr(uint8_t *p, unsigned type, size_t body_len, uint32_t id)
{
	ppl_wr1(p, type);
	ppl_wr1(p + 1, 0);
	ppl_wr2(p + 2, (uint32_t)body_len);
	ppl_wr4(p + 4, id);
}

size_t ppl_elide_put_hello(uint8_t *buf, const char *token, size_t token_len)
{
	if (token_len > PPL_ELIDE_TOKEN_MAX)
		token_len = PPL_ELIDE_TOKEN_MAX;
	uint8_t *b = buf + PPL_ELIDE_HDR_LEN;
	ppl_wr4(b, PPL_ELIDE_MAGIC);
	ppl_wr2(b + 4, PPL_ELIDE_VERSION);
	ppl_wr2(b + 6, PPL_ELIDE_VERSION);
	ppl_wr2(b + 8, (uint32_t)token_len);
	ppl_wr2(b + 10, 0);
	if (token_len)
		memcpy(b + 12, token, token_len);
	put_hdr(buf, PPL_ELIDE_T_HELLO, 12 + token_len, 0);
	return PPL_ELIDE_HELLO_MIN + token_len;
}

size_t ppl_elide_put_hello_reply(uint8_t *buf, const struct ppl_elide_hello_reply *r)
{
	uint8_t *b = buf + PPL_ELIDE_HDR_LEN;
	put_hdr(buf, PPL_ELIDE_T_HELLO_REPLY, 12, 0);
	ppl_wr4(b, PPL_ELIDE_MAGIC);
	ppl_wr2(b + 4, r->version);
	ppl_wr2(b + 6, r->status);
	ppl_wr4(b + 8, r->max_inflight);
	return PPL_ELIDE_HELLO_REPLY_LEN;
}

size_t ppl_elide_put_req(uint8_t *buf, const struct ppl_elide_req *r)
{
	uint8_t *b = buf + PPL_ELIDE_HDR_LEN;
	put_hdr(buf, PPL_ELIDE_T_ELIDE, 24, r->id);
	ppl_wr4(b, r->space);
	ppl_wr4(b + 4, r->page_no);
	ppl_wr8(b + 8, r->lsn);
	ppl_wr4(b + 16, r->checksum);
	ppl_wr4(b + 20, r->page_size);
	return PPL_ELIDE_REQ_LEN;
}

size_t ppl_elide_put_verdict(uint8_t *buf, const struct ppl_elide_verdict *v)
{
	uint8_t *b = buf + PPL_ELIDE_HDR_LEN;
	put_hdr(buf, PPL_ELIDE_T_VERDICT, 8, v->id);
	memset(b, 0, 8);
	ppl_wr1(b, v->reason);
	return PPL_ELIDE_VERDICT_LEN;
}

long ppl_elide_frame(const uint8_t *buf, size_t len, struct ppl_elide_hdr *h)
{
	if (len < PPL_ELIDE_HDR_LEN)
		return 0;
	h->type = buf[0];
	h->flags = buf[1];
	h->body_len = (uint16_t)ppl_rd2(buf + 2);
	h->id = ppl_rd4(buf + 4);
	if (h->flags)
		return -1;
	switch (h->type) {
	case PPL_ELIDE_T_HELLO:
		if (h->body_len < 12 || h->body_len > 12 + PPL_ELIDE_TOKEN_MAX)
			return -1;
		break;
	case PPL_ELIDE_T_HELLO_REPLY:
		if (h->body_len != 12)
			return -1;
		break;
	case PPL_ELIDE_T_ELIDE:
		if (h->body_len != 24)
			return -1;
		break;
	case PPL_ELIDE_T_VERDICT:
		if (h->body_len != 8)
			return -1;
		break;
	default:
		return -1;
	}
	size_t total = PPL_ELIDE_HDR_LEN + h->body_len;
	return len < total ? 0 : (long)total;
}

int ppl_elide_get_hello(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_hello *out)
{
	const uint8_t *b = frame + PPL_ELIDE_HDR_LEN;
	if (h->type != PPL_ELIDE_T_HELLO || ppl_rd4(b) != PPL_ELIDE_MAGIC)
		return -1;
	out->version_min = (uint16_t)ppl_rd2(b + 4);
	out->version_max = (uint16_t)ppl_rd2(b + 6);
	out->token_len = (uint16_t)ppl_rd2(b + 8);
	if (ppl_rd2(b + 10) != 0 || out->token_len > PPL_ELIDE_TOKEN_MAX || 12u + out->token_len != h->body_len ||
	    out->version_min > out->version_max)
		return -1;
	memcpy(out->token, b + 12, out->token_len);
	return 0;
}

int ppl_elide_get_hello_reply(const uint8_t *frame, const struct ppl_elide_hdr *h,
			      struct ppl_elide_hello_reply *out)
{
	const uint8_t *b = frame + PPL_ELIDE_HDR_LEN;
	if (h->type != PPL_ELIDE_T_HELLO_REPLY || ppl_rd4(b) != PPL_ELIDE_MAGIC)
		return -1;
	out->version = (uint16_t)ppl_rd2(b + 4);
	out->status = (uint16_t)ppl_rd2(b + 6);
	out->max_inflight = ppl_rd4(b + 8);
	return 0;
}

int ppl_elide_get_req(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_req *out)
{
	const uint8_t *b = frame + PPL_ELIDE_HDR_LEN;
	if (h->type != PPL_ELIDE_T_ELIDE)
		return -1;
	out->id = h->id;
	out->space = ppl_rd4(b);
	out->page_no = ppl_rd4(b + 4);
	out->lsn = ppl_rd8(b + 8);
	out->checksum = ppl_rd4(b + 16);
	out->page_size = ppl_rd4(b + 20);
	return 0;
}

int ppl_elide_get_verdict(const uint8_t *frame, const struct ppl_elide_hdr *h, struct ppl_elide_verdict *out)
{
	const uint8_t *b = frame + PPL_ELIDE_HDR_LEN;
	if (h->type != PPL_ELIDE_T_VERDICT || b[1] || ppl_rd2(b + 2) || ppl_rd4(b + 4))
		return -1;
	out->id = h->id;
	out->reason = b[0];
	return 0;
}

const char *ppl_elide_reason_name(unsigned reason)
{
	static const char *const names[PPL_ELIDE_REASON_COUNT] = {
		"ack", "unknown_file", "unknown_page", "lsn_behind", "lsn_ahead", "checksum", "not_durable",
		"disabled", "busy", "page_size", "unsupported", "internal", "other",
	};
	return reason < PPL_ELIDE_REASON_COUNT ? names[reason] : "other";
}

const char *ppl_elide_hello_status_name(unsigned status)
{
	switch (status) {
	case PPL_ELIDE_HELLO_OK: return "ok";
	case PPL_ELIDE_HELLO_BAD_MAGIC: return "bad magic";
	case PPL_ELIDE_HELLO_BAD_VERSION: return "no common protocol version";
	case PPL_ELIDE_HELLO_BAD_TOKEN: return "bad token";
	case PPL_ELIDE_HELLO_BUSY: return "too many clients";
	default: return "unknown status";
	}
}
