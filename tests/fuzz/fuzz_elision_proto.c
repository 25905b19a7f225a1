/* libFuzzer target: arbitrary bytes as a received elision stream. Every
 * frame the splitter accepts is decoded with the decoder for its type;
 * a decoded request or verdict must encode back to the same bytes (the
 * format has one spelling per message). Nothing may read past the input. */
#include <stdlib.h>
#include <string.h>

#include "ppl/elision_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	while (off < size) {
		struct ppl_elide_hdr h;
		long n = ppl_elide_frame(data + off, size - off, &h);
		if (n <= 0)
			break;
		const uint8_t *f = data + off;
		uint8_t again[PPL_ELIDE_FRAME_MAX];
		switch (h.type) {
		case PPL_ELIDE_T_HELLO: {
			struct ppl_elide_hello m;
			ppl_elide_get_hello(f, &h, &m);
			break;
		}
		case PPL_ELIDE_T_HELLO_REPLY: {
			/* the reply carries no request id: compare all but those 4 bytes */
			struct ppl_elide_hello_reply m;
			if (!ppl_elide_get_hello_reply(f, &h, &m) &&
			    (ppl_elide_put_hello_reply(again, &m) != (size_t)n || memcmp(again, f, 4) ||
			     memcmp(again + 8, f + 8, (size_t)n - 8)))
				abort();
			break;
		}
		case PPL_ELIDE_T_ELIDE: {
			struct ppl_elide_req m;
			if (!ppl_elide_get_req(f, &h, &m) &&
			    (ppl_elide_put_req(again, &m) != (size_t)n || memcmp(again, f, (size_t)n)))
				abort();
			break;
		}
		case PPL_ELIDE_T_VERDICT: {
			struct ppl_elide_verdict m;
			if (!ppl_elide_get_verdict(f, &h, &m) &&
			    (ppl_elide_put_verdict(again, &m) != (size_t)n || memcmp(again, f, (size_t)n)))
				abort();
			break;
		}
		default:
			abort(); /* the splitter must not accept other types */
		}
		off += (size_t)n;
	}
	return 0;
}
