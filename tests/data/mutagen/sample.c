/* A small C file with known conditions: tests/test_selftest_generated.py expects
 * exactly the mutants selftest/mutagen.py makes of it (and the ones it drops). */
#define FFA_RET_INVALID_PARAMETERS (-2)
#define FFA_RET_DENIED (-6)
#define MAX_LEN 64
#define WARN_ON(c) ((c) ? 1 : 0)

int check(unsigned int len, unsigned int count, int busy)
{
	int ret = 0;

	if (len > MAX_LEN || !count) {
		ret = FFA_RET_INVALID_PARAMETERS;
		goto out;
	}

	if (busy)
		return FFA_RET_DENIED;

	if (count != 1)
		ret = len % 16;
	WARN_ON(len == 3);
out:
	return ret;
}

int sign(int x)
{
	if (x >= 0)
		return 1;
	else
		return 0;
}
