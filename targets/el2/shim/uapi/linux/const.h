/* Stands in for <uapi/linux/const.h>. */
#ifndef KC_UAPI_LINUX_CONST_H
#define KC_UAPI_LINUX_CONST_H
#define __AC(X, Y) (X##Y)
#define _AC(X, Y) __AC(X, Y)
#define _UL(x) (_AC(x, UL))
#define _ULL(x) (_AC(x, ULL))
#endif
