/* The handle behind attend.h's attend_model, shared by the files of the public API. */
#ifndef AT_ATTEND_MODEL_H
#define AT_ATTEND_MODEL_H

#include "attend.h"
#include "seq2seq.h"

struct attend_model {
    s2s_model *m;
    attend_config config;
    int inspect_only; /* loaded without packing: no translation */
};

#endif
