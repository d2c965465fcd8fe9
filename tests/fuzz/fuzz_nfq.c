/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the name gate's kernel path (kiwi/nfq.h): what
 * one recv of its queue socket gave (netlink messages from the kernel,
 * carrying packets the sandbox sent), each packet's IPv4/TCP header, and
 * its payload taken into a flow's first bytes in sequence order, then
 * read as a ClientHello, as proxy_tls.c does.
 * Properties: never crashes or reads out of bounds; a parsed segment's
 * payload lies inside the packet; the head never holds more than its
 * capacity, next moves by exactly the bytes taken, and the bytes taken
 * are the segment's tail; a retransmission whose old part differs from
 * what was taken is refused (BAD), never taken. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiwi/nfq.h"
#include "kiwi/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t buf[KIWI_SNI_PEEK_MAX];
static struct kiwi_stream_head head;

static void take(const struct kiwi_tcp4 *t)
{
	size_t before = head.len;
	uint32_t next = head.next;
	enum kiwi_stream_take r = kiwi_stream_take(&head, t->seq, t->payload, t->payload_len);
	if (head.len > head.cap)
		abort();
	if (r != KIWI_STREAM_TOOK) {
		if (head.len != before || head.next != next)
			abort();
		return;
	}
	size_t added = head.len - before;
	if (head.next - next != added || added == 0 || added > t->payload_len ||
	    memcmp(head.buf + before, t->payload + t->payload_len - added, added))
		abort();
	char name[KIWI_SNI_NAME_MAX + 1];
	if (kiwi_sni_tls(head.buf, head.len, name) == KIWI_SNI_NAME && !name[0])
		abort();
}

static void on_packet(const struct kiwi_nfq_packet *pkt, void *arg)
{
	(void)arg;
	struct kiwi_tcp4 t;
	if (!pkt->data || !kiwi_tcp4_parse(pkt->data, pkt->len, &t))
		return;
	if (t.payload < pkt->data || t.payload + t.payload_len > pkt->data + pkt->len)
		abort();
	take(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	head = (struct kiwi_stream_head){ .buf = buf, .cap = sizeof(buf) };
	memcpy(&head.next, data, 4);
	/* the kernel's messages are aligned: so is a copy of them; the
	 * spare bytes as the gate's buffer has (an attribute walk rounds a
	 * message's end up to 4) */
	uint8_t *copy = calloc(1, size - 4 + 8);
	if (!copy)
		return 0;
	memcpy(copy, data + 4, size - 4);
	kiwi_nfq_parse(copy, size - 4, on_packet, NULL);
	free(copy);
	return 0;
}
