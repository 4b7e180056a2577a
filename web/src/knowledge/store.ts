/**
 * The tenant's datasets as the knowledge pages and the dataset picker share them:
 * loaded on demand (`load`), refreshed after every change made through the pages.
 */
import { create } from 'zustand';
import { kbApi, type Dataset } from './api';

interface DatasetsState {
  datasets: Dataset[];
  status: 'idle' | 'loading' | 'ready' | 'error';
  error: string | null;
  /** Reads the list again (callers need not wait for it). */
  load: () => Promise<void>;
}

export const useDatasets = create<DatasetsState>((set) => ({
  datasets: [],
  status: 'idle',
  error: null,
  load: async () => {
    set((s) => ({ status: s.status === 'ready' ? 'ready' : 'loading', error: null }));
    try {
      const { datasets } = await kbApi.list();
      set({ datasets, status: 'ready' });
    } catch (e) {
      set({ status: 'error', error: (e as Error).message });
    }
  },
}));
