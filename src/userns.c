/* SPDX-License-Identifier: Apache-2.0 */
#include "kiwi/err.h"
