/*
 * A fake libnvidia-ml.so.1 for vramguard's integration tests.
 *
 * It exports only the NVML symbols that nvidia-ml-py (pynvml) resolves on the code paths
 * vramguard uses, with the real signatures, return codes and struct layouts, so the tests
 * exercise the real pynvml ctypes code. The machine it describes is read from the text file
 * named by $FAKE_NVML_CONFIG on EVERY call, so a test can change free memory or processes
 * while vramguard is sampling. If $FAKE_NVML_LOG is set, each call appends its function name
 * (one per line) to that file, so a test can wait for N samples or assert what was called.
 *
 * Config format (one record per line, `#` comments, key=value tokens, "double quotes"
 * for values with spaces; sizes in bytes):
 *   init rc=9                    nvmlInit* returns 9 (NVML_ERROR_DRIVER_NOT_LOADED)
 *   count rc=4                   nvmlDeviceGetCount_v2 returns 4
 *   driver version=550.54.15
 *   gpu uuid=GPU-1 name="NVIDIA H100 80GB HBM3" total=N free=N used=N reserved=N
 *       util=37 mem_util=5 cc=9.0 mig=-1|0|1 lost=0|1 err_handle=RC err_name=RC
 *       err_uuid=RC err_memory=RC err_memory_v2=RC err_util=RC err_cc=RC err_procs=RC
 *       nvlink=D p2p=D err_p2p=RC   GPUs with the same non-zero nvlink domain D are linked by
 *                                NVLink (which implies peer access); the same non-zero p2p
 *                                domain: peer access over PCIe. nvmlDeviceGetP2PStatus says so.
 *   mig gpu=0 uuid=MIG-... name="... MIG 3g.40gb" total=N free=N used=N gi=1 ci=0
 *   proc gpu=0 [mig=0] pid=1234 used=N|NA
 * Unknown keys are ignored. mig=-1 (default) makes nvmlDeviceGetMigMode NOT_SUPPORTED.
 *
 * Build: gcc -shared -fPIC -O2 -o libnvidia-ml.so.1 fake_nvml.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

#define NVML_MEMORY_V2 0x02000028u
#define MAX_GPUS 16
#define MAX_MIGS 7
#define MAX_PROCS 128

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

/* nvmlProcessInfo_t as used by nvmlDeviceGetComputeRunningProcesses_v3 (pynvml's
 * c_nvmlProcessInfo_v3_t == c_nvmlProcessInfo_v2_t). */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    char uuid[96];
    char name[96];
    unsigned long long total, free, used, reserved;
    int util, mem_util, cc_major, cc_minor;
    int mig_mode; /* -1: not supported */
    int gi, ci;
    int lost;
    int err_handle, err_name, err_uuid, err_memory, err_memory_v2, err_util, err_cc, err_procs;
    int nmig;
    int nvlink, p2p, err_p2p;
} fake_dev;

typedef struct {
    int gpu, mig;
    unsigned int pid;
    unsigned long long used;
} fake_proc;

static struct {
    int init_rc, count_rc;
    char driver[80];
    int ngpu;
    fake_dev gpu[MAX_GPUS];
    fake_dev mig[MAX_GPUS][MAX_MIGS];
    int nproc;
    fake_proc proc[MAX_PROCS];
} cfg;

static void log_call(const char *name) {
    const char *path = getenv("FAKE_NVML_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", name);
    fclose(f);
}

/* Split the next token off *p: `key=value` or `key="value with spaces"`. */
static int next_token(char **p, char *key, size_t klen, char *val, size_t vlen) {
    char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s || *s == '\n' || *s == '#') return 0;
    size_t k = 0, v = 0;
    while (*s && *s != '=' && *s != ' ' && *s != '\t' && *s != '\n') {
        if (k + 1 < klen) key[k++] = *s;
        s++;
    }
    key[k] = 0;
    if (*s == '=') {
        s++;
        if (*s == '"') {
            s++;
            while (*s && *s != '"' && *s != '\n') { if (v + 1 < vlen) val[v++] = *s; s++; }
            if (*s == '"') s++;
        } else {
            while (*s && *s != ' ' && *s != '\t' && *s != '\n') { if (v + 1 < vlen) val[v++] = *s; s++; }
        }
    }
    val[v] = 0;
    *p = s;
    return 1;
}

static void copy_str(char *dst, size_t n, const char *src) {
    size_t len = strlen(src);
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

static unsigned long long parse_bytes(const char *v) {
    if (strcmp(v, "NA") == 0) return ~0ULL; /* NVML_VALUE_NOT_AVAILABLE */
    return strtoull(v, NULL, 10);
}

static void set_dev_field(fake_dev *d, const char *k, const char *v) {
    if (!strcmp(k, "uuid")) copy_str(d->uuid, sizeof d->uuid, v);
    else if (!strcmp(k, "name")) copy_str(d->name, sizeof d->name, v);
    else if (!strcmp(k, "total")) d->total = parse_bytes(v);
    else if (!strcmp(k, "free")) d->free = parse_bytes(v);
    else if (!strcmp(k, "used")) d->used = parse_bytes(v);
    else if (!strcmp(k, "reserved")) d->reserved = parse_bytes(v);
    else if (!strcmp(k, "util")) d->util = atoi(v);
    else if (!strcmp(k, "mem_util")) d->mem_util = atoi(v);
    else if (!strcmp(k, "cc")) { d->cc_major = atoi(v); const char *dot = strchr(v, '.'); d->cc_minor = dot ? atoi(dot + 1) : 0; }
    else if (!strcmp(k, "mig")) d->mig_mode = atoi(v);
    else if (!strcmp(k, "gi")) d->gi = atoi(v);
    else if (!strcmp(k, "ci")) d->ci = atoi(v);
    else if (!strcmp(k, "lost")) d->lost = atoi(v);
    else if (!strcmp(k, "err_handle")) d->err_handle = atoi(v);
    else if (!strcmp(k, "err_name")) d->err_name = atoi(v);
    else if (!strcmp(k, "err_uuid")) d->err_uuid = atoi(v);
    else if (!strcmp(k, "err_memory")) d->err_memory = atoi(v);
    else if (!strcmp(k, "err_memory_v2")) d->err_memory_v2 = atoi(v);
    else if (!strcmp(k, "err_util")) d->err_util = atoi(v);
    else if (!strcmp(k, "err_cc")) d->err_cc = atoi(v);
    else if (!strcmp(k, "err_procs")) d->err_procs = atoi(v);
    else if (!strcmp(k, "nvlink")) d->nvlink = atoi(v);
    else if (!strcmp(k, "p2p")) d->p2p = atoi(v);
    else if (!strcmp(k, "err_p2p")) d->err_p2p = atoi(v);
}

static void init_dev(fake_dev *d) {
    memset(d, 0, sizeof *d);
    d->mig_mode = -1;
    d->cc_major = 8;
}

/* Re-read the whole config. Returns 0 on success, NVML_ERROR_UNKNOWN if unreadable. */
static int load(void) {
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.driver, sizeof cfg.driver, "550.54.15");
    const char *path = getenv("FAKE_NVML_CONFIG");
    if (!path) return NVML_ERROR_UNKNOWN;
    FILE *f = fopen(path, "r");
    if (!f) return NVML_ERROR_UNKNOWN;
    char line[1024], key[64], val[256];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        if (!next_token(&p, key, sizeof key, val, sizeof val)) continue;
        if (!strcmp(key, "init")) {
            while (next_token(&p, key, sizeof key, val, sizeof val))
                if (!strcmp(key, "rc")) cfg.init_rc = atoi(val);
        } else if (!strcmp(key, "count")) {
            while (next_token(&p, key, sizeof key, val, sizeof val))
                if (!strcmp(key, "rc")) cfg.count_rc = atoi(val);
        } else if (!strcmp(key, "driver")) {
            while (next_token(&p, key, sizeof key, val, sizeof val))
                if (!strcmp(key, "version")) copy_str(cfg.driver, sizeof cfg.driver, val);
        } else if (!strcmp(key, "gpu") && cfg.ngpu < MAX_GPUS) {
            fake_dev *d = &cfg.gpu[cfg.ngpu++];
            init_dev(d);
            while (next_token(&p, key, sizeof key, val, sizeof val)) set_dev_field(d, key, val);
        } else if (!strcmp(key, "mig")) {
            fake_dev tmp;
            int g = -1;
            init_dev(&tmp);
            while (next_token(&p, key, sizeof key, val, sizeof val)) {
                if (!strcmp(key, "gpu")) g = atoi(val); else set_dev_field(&tmp, key, val);
            }
            if (g >= 0 && g < cfg.ngpu && cfg.gpu[g].nmig < MAX_MIGS) {
                tmp.cc_major = cfg.gpu[g].cc_major;
                tmp.cc_minor = cfg.gpu[g].cc_minor;
                cfg.mig[g][cfg.gpu[g].nmig++] = tmp;
            }
        } else if (!strcmp(key, "proc") && cfg.nproc < MAX_PROCS) {
            fake_proc *pr = &cfg.proc[cfg.nproc++];
            pr->gpu = 0; pr->mig = -1; pr->pid = 0; pr->used = 0;
            while (next_token(&p, key, sizeof key, val, sizeof val)) {
                if (!strcmp(key, "gpu")) pr->gpu = atoi(val);
                else if (!strcmp(key, "mig")) pr->mig = atoi(val);
                else if (!strcmp(key, "pid")) pr->pid = (unsigned int)strtoul(val, NULL, 10);
                else if (!strcmp(key, "used")) pr->used = parse_bytes(val);
            }
        }
    }
    fclose(f);
    return 0;
}

/* Handles encode (gpu, mig) so they stay valid across re-reads of the config. */
#define HANDLE_BASE 0x1000u
static nvmlDevice_t make_handle(int gpu, int mig) {
    return (nvmlDevice_t)(uintptr_t)(HANDLE_BASE + (unsigned)gpu * 16u + (unsigned)(mig + 1));
}

/* Resolve a handle to its device after a fresh load; sets *rc on failure. */
static fake_dev *resolve(nvmlDevice_t h, int *gpu_out, int *mig_out, int *rc) {
    int lr = load();
    if (lr) { *rc = lr; return NULL; }
    uintptr_t v = (uintptr_t)h;
    if (v < HANDLE_BASE) { *rc = NVML_ERROR_INVALID_ARGUMENT; return NULL; }
    v -= HANDLE_BASE;
    int gpu = (int)(v / 16u), mig = (int)(v % 16u) - 1;
    if (gpu >= cfg.ngpu) { *rc = NVML_ERROR_INVALID_ARGUMENT; return NULL; }
    fake_dev *parent = &cfg.gpu[gpu];
    if (parent->lost) { *rc = NVML_ERROR_GPU_IS_LOST; return NULL; }
    if (gpu_out) *gpu_out = gpu;
    if (mig_out) *mig_out = mig;
    if (mig < 0) return parent;
    if (mig >= parent->nmig) { *rc = NVML_ERROR_INVALID_ARGUMENT; return NULL; }
    return &cfg.mig[gpu][mig];
}

#define RESOLVE(h) \
    int rc_ = 0, gpu_ = 0, mig_ = -1; \
    fake_dev *d = resolve((h), &gpu_, &mig_, &rc_); \
    if (!d) return rc_; \
    (void)gpu_; (void)mig_;

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    log_call("nvmlInitWithFlags");
    int rc = load();
    return rc ? rc : cfg.init_rc;
}

nvmlReturn_t nvmlInit_v2(void) {
    log_call("nvmlInit_v2");
    int rc = load();
    return rc ? rc : cfg.init_rc;
}

nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

nvmlReturn_t nvmlShutdown(void) {
    log_call("nvmlShutdown");
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    log_call("nvmlSystemGetDriverVersion");
    int rc = load();
    if (rc) return rc;
    if (length < strlen(cfg.driver) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(version, length, "%s", cfg.driver);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    log_call("nvmlDeviceGetCount_v2");
    int rc = load();
    if (rc) return rc;
    if (cfg.count_rc) return cfg.count_rc;
    *count = (unsigned int)cfg.ngpu;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    log_call("nvmlDeviceGetHandleByIndex_v2");
    int rc = load();
    if (rc) return rc;
    if ((int)index >= cfg.ngpu) return NVML_ERROR_INVALID_ARGUMENT;
    if (cfg.gpu[index].err_handle) return cfg.gpu[index].err_handle;
    *device = make_handle((int)index, -1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    log_call("nvmlDeviceGetName");
    RESOLVE(device);
    if (d->err_name) return d->err_name;
    if (length < strlen(d->name) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, length, "%s", d->name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    log_call("nvmlDeviceGetUUID");
    RESOLVE(device);
    if (d->err_uuid) return d->err_uuid;
    if (length < strlen(d->uuid) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(uuid, length, "%s", d->uuid);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    log_call("nvmlDeviceGetMemoryInfo");
    RESOLVE(device);
    if (d->err_memory) return d->err_memory;
    memory->total = d->total;
    memory->free = d->free;
    memory->used = d->used ? d->used : d->total - d->free;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    log_call("nvmlDeviceGetMemoryInfo_v2");
    RESOLVE(device);
    if (d->err_memory_v2) return d->err_memory_v2;
    if (d->err_memory) return d->err_memory;
    if (memory->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = d->total;
    memory->reserved = d->reserved;
    memory->free = d->free;
    memory->used = d->used ? d->used : d->total - d->free - d->reserved;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    log_call("nvmlDeviceGetUtilizationRates");
    RESOLVE(device);
    if (mig_ >= 0) return NVML_ERROR_NOT_SUPPORTED; /* as on real MIG instances */
    if (d->err_util) return d->err_util;
    utilization->gpu = (unsigned int)d->util;
    utilization->memory = (unsigned int)d->mem_util;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    log_call("nvmlDeviceGetCudaComputeCapability");
    RESOLVE(device);
    if (d->err_cc) return d->err_cc;
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
    log_call("nvmlDeviceGetComputeRunningProcesses_v3");
    RESOLVE(device);
    if (d->err_procs) return d->err_procs;
    unsigned int n = 0;
    for (int i = 0; i < cfg.nproc; i++)
        if (cfg.proc[i].gpu == gpu_ && cfg.proc[i].mig == mig_) n++;
    if (n == 0) { *infoCount = 0; return NVML_SUCCESS; }
    if (infos == NULL || *infoCount < n) { *infoCount = n; return NVML_ERROR_INSUFFICIENT_SIZE; }
    unsigned int k = 0;
    for (int i = 0; i < cfg.nproc; i++) {
        if (cfg.proc[i].gpu != gpu_ || cfg.proc[i].mig != mig_) continue;
        infos[k].pid = cfg.proc[i].pid;
        infos[k].usedGpuMemory = cfg.proc[i].used;
        infos[k].gpuInstanceId = mig_ >= 0 ? (unsigned int)d->gi : 0xFFFFFFFFu;
        infos[k].computeInstanceId = mig_ >= 0 ? (unsigned int)d->ci : 0xFFFFFFFFu;
        k++;
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    log_call("nvmlDeviceGetMigMode");
    RESOLVE(device);
    if (mig_ >= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (d->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = (unsigned int)d->mig_mode;
    *pendingMode = (unsigned int)d->mig_mode;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    log_call("nvmlDeviceGetMaxMigDeviceCount");
    RESOLVE(device);
    if (mig_ >= 0 || d->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
    *count = MAX_MIGS;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
    log_call("nvmlDeviceGetMigDeviceHandleByIndex");
    RESOLVE(device);
    if (mig_ >= 0 || d->mig_mode < 0) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= MAX_MIGS) return NVML_ERROR_INVALID_ARGUMENT;
    if ((int)index >= d->nmig) return NVML_ERROR_NOT_FOUND;
    *migDevice = make_handle(gpu_, (int)index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    log_call("nvmlDeviceGetGpuInstanceId");
    RESOLVE(device);
    if (mig_ < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned int)d->gi;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    log_call("nvmlDeviceGetComputeInstanceId");
    RESOLVE(device);
    if (mig_ < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned int)d->ci;
    return NVML_SUCCESS;
}

/* nvmlGpuP2PCapsIndex_t: READ 0, WRITE 1, NVLINK 2, ATOMICS 3, PCI 4; nvmlGpuP2PStatus_t:
 * OK 0, CHIPSET_NOT_SUPPORTED 1, ..., NOT_SUPPORTED 5. */
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex,
                                    int *p2pStatus) {
    log_call("nvmlDeviceGetP2PStatus");
    int rc = 0;
    fake_dev *a = resolve(device1, NULL, NULL, &rc);
    if (!a) return rc;
    int a_nvlink = a->nvlink, a_p2p = a->p2p, a_err = a->err_p2p;
    fake_dev *b = resolve(device2, NULL, NULL, &rc);
    if (!b) return rc;
    if (!p2pStatus) return NVML_ERROR_INVALID_ARGUMENT;
    if (a_err) return a_err;
    int nvlink = a_nvlink && a_nvlink == b->nvlink;
    int p2p = nvlink || (a_p2p && a_p2p == b->p2p);
    if (p2pIndex == 2) *p2pStatus = nvlink ? 0 : 5;
    else if (p2pIndex >= 0 && p2pIndex <= 4) *p2pStatus = p2p ? 0 : 1;
    else return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}
