/* OP-TEE's heap (lib/libutils/isoc/bget_malloc.c), unmodified, statics in the
 * snapshot sections. Its malloc/calloc/free/... are renamed kc_optee_* in every
 * tree object (build.sh: objcopy --redefine-syms=malloc.syms) so they do not
 * take glibc's place in the host process. */
#pragma clang section bss="kc_optee_bss" data="kc_optee_data"
#include "lib/libutils/isoc/bget_malloc.c"
/* the core heap (CFG_CORE_HEAP_SIZE), as the linker script's __heap1 */
static uint8_t kc_optee_heap[CFG_CORE_HEAP_SIZE] __aligned(64);
#pragma clang section bss="" data=""
void kc_optee_heap_init(void);
void kc_optee_heap_init(void) { malloc_add_pool(kc_optee_heap, sizeof(kc_optee_heap)); }
