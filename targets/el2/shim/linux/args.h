/* Stands in for <linux/args.h> (macro-counting helpers for arm_smccc_1_1_*). */
#ifndef KC_LINUX_ARGS_H
#define KC_LINUX_ARGS_H
#define __KC_COUNT_ARGS(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _n, X...) _n
#define COUNT_ARGS(X...) __KC_COUNT_ARGS(, ##X, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define __KC_CONCAT(a, b) a##b
#define CONCATENATE(a, b) __KC_CONCAT(a, b)
#endif
