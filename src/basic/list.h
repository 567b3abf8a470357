/* SPDX-License-Identifier: MIT */
#pragma once

/* Intrusive doubly linked lists: a node is any struct with `prev` and `next` pointers to its
 * own type, a list is a pointer to its first node (NULL when empty). `head` is the address of
 * that pointer. Each macro evaluates `node` more than once: pass a plain variable. */

#define LIST_PREPEND(head, node)                                                                   \
	do {                                                                                       \
		(node)->prev = NULL;                                                               \
		(node)->next = *(head);                                                            \
		if (*(head))                                                                       \
			(*(head))->prev = (node);                                                  \
		*(head) = (node);                                                                  \
	} while (0)

/* Walks to the end: for short lists, where order matters. */
#define LIST_APPEND(head, node)                                                                    \
	do {                                                                                       \
		__typeof__(node) _last = *(head);                                                  \
		(node)->next = NULL;                                                               \
		while (_last && _last->next)                                                       \
			_last = _last->next;                                                       \
		(node)->prev = _last;                                                              \
		if (_last)                                                                         \
			_last->next = (node);                                                      \
		else                                                                               \
			*(head) = (node);                                                          \
	} while (0)

/* Unlinks node from the list at head; its pointers are NULL afterwards. */
#define LIST_REMOVE(head, node)                                                                    \
	do {                                                                                       \
		if ((node)->prev)                                                                  \
			(node)->prev->next = (node)->next;                                         \
		else                                                                               \
			*(head) = (node)->next;                                                    \
		if ((node)->next)                                                                  \
			(node)->next->prev = (node)->prev;                                         \
		(node)->prev = (node)->next = NULL;                                                \
	} while (0)
